"""CBOW and paragraph-vector records (no TensorFlow): invariants, document ids, bad input."""

import os

import numpy as np
import pytest

from textrecords.wire import example_decoder
from textrecords.datasets import layout
from textrecords.files import tfrecord
from textrecords.errors import UserError
from w2v_data import generator
from w2v_data import schema
from w2v_data.config import W2vConfig

from test_w2v_reliability import assert_one_line_error, visible  # pylint: disable=wrong-import-order

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "testdata", "w2v_tiny.txt")


def _tiny_lines():
  with open(TINY, encoding="utf-8") as f:
    return [l for l in f.read().split("\n") if l.strip()]


def _records(out_dir):
  out = []
  for name in sorted(os.listdir(out_dir)):
    if name.startswith(layout.DatasetLayout.for_dir(out_dir).record_stem(schema.SPLIT)) and (
        not layout.is_index_name(name)):
      out += [example_decoder.decode_example(r)
              for r in tfrecord.read_records(os.path.join(out_dir, name))]
  return out


def _create(tmp_path, model, text=None, workers=1, **kw):
  src = tmp_path / "in.txt"
  if text is None:
    text = "\n".join(_tiny_lines()) + "\n"
  src.write_text(text, encoding="utf-8")
  args = dict(min_freq=2, subsample_t=5e-2, max_window_size=3, num_noise_words=3,
              random_seed=5)
  args.update(kw)
  out = str(tmp_path / f"out_{model}_{workers}")
  meta = generator.create(W2vConfig(input_file=str(src), output_dir=out, model=model,
                                   num_workers=workers, num_shards=2, quiet=True, **args)).meta
  return out, meta


def _vocab_index(out_dir):
  with open(os.path.join(out_dir, schema.VOCAB_NAME), encoding="utf-8") as f:
    return {t: i for i, t in enumerate(f.read().split("\n")[:-1])}


def _check_window(toks, i, ctx, width):
  return any(ctx == toks[max(0, i - w):i] + toks[i + 1:i + w + 1] for w in range(1, width + 1))


def _is_subsequence(small, big):
  it = iter(big)
  return all(t in it for t in small)


@pytest.mark.parametrize("model", ["cbow", "pv_dm"])
def test_cbow_and_pv_dm_record_invariants(tmp_path, model):
  out, meta = _create(tmp_path, model)
  lines = _tiny_lines()
  index = _vocab_index(out)
  v = len(index)
  recs = _records(out)
  assert meta["model"] == model and len(recs) == meta["counts"]["records"] > 50
  k, width = 3, 3
  seen_docs = set()
  for r in recs:
    toks = r[schema.CENTERS]
    n = r[schema.NUM_CONTEXTS]
    assert len(toks) == len(n) >= 2 and len(r[schema.NEGATIVES]) == k * len(toks)
    assert len(r[schema.CONTEXTS]) == sum(n)
    if model == "pv_dm":
      (doc,) = r[schema.DOC_ID]
      assert 0 <= doc < meta["docs"]["size"] and doc not in seen_docs
      seen_docs.add(doc)
      ids = [index.get(t, 0) for t in lines[doc].split()]
      assert _is_subsequence(toks, [i for i in ids if i])
    start = 0
    for i, c in enumerate(toks):
      ctx = r[schema.CONTEXTS][start:start + n[i]]
      start += n[i]
      assert _check_window(toks, i, ctx, width), (toks, i, ctx)
      neg = r[schema.NEGATIVES][k * i:k * (i + 1)]
      assert all(1 <= x < v for x in neg)
      assert c not in neg and not set(neg) & set(ctx), (c, ctx, neg)
  assert meta["counts"]["negatives"] == k * meta["counts"]["centers"]


def test_pv_dbow_record_invariants_and_doc_ids(tmp_path):
  lines = _tiny_lines()
  text = "".join(f"doc{i * 7}\t{l}\n" for i, l in enumerate(lines))
  out, meta = _create(tmp_path, "pv_dbow", text, doc_id_column=True, subsample_t=0.2)
  index = _vocab_index(out)
  with open(os.path.join(out, schema.DOCS_NAME), encoding="utf-8") as f:
    names = f.read().split("\n")[:-1]
  assert names == [f"doc{i * 7}" for i in range(len(lines))]
  assert meta["docs"]["size"] == len(lines)
  recs = _records(out)
  docs = [r[schema.DOC_ID][0] for r in recs]
  assert docs == sorted(set(docs)) and all(0 <= d < len(lines) for d in docs)
  assert len(docs) > 0.9 * len(lines)  # documents whose words all fell out give no record
  for r in recs:
    doc = r[schema.DOC_ID][0]
    toks = r[schema.CENTERS]
    ids = [index.get(t, 0) for t in lines[doc].split()]
    assert toks and _is_subsequence(toks, [i for i in ids if i])
    neg = r[schema.NEGATIVES]
    assert len(neg) == 3 * len(toks) and schema.CONTEXTS not in r
    for i, t in enumerate(toks):
      assert t not in neg[3 * i:3 * i + 3] and all(1 <= x < len(index) for x in neg)


@pytest.mark.parametrize("model", ["skipgram", "cbow", "pv_dbow", "pv_dm"])
def test_same_bytes_for_any_worker_count_and_read_chunk(tmp_path, model, monkeypatch):
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(generator, "CHUNK_SENTENCES", 7)
  one, _ = _create(tmp_path, model, workers=1)
  monkeypatch.setattr(corpus_lib, "CHUNK_BYTES", 300)  # many read units
  three, _ = _create(tmp_path, model, workers=3)
  for name in visible(one):
    if name != layout.META_NAME:
      with open(os.path.join(one, name), "rb") as a, open(os.path.join(three, name), "rb") as b:
        assert a.read() == b.read(), name


def test_document_input_errors(tmp_path):
  good = "a\tx y x\nb\ty z\n"
  cases = [
      ("a\tx y\nno tab here\n", True, "in.txt:2: expected 'id<TAB>text'"),
      ("a\tx y\n\tz w\n", True, "in.txt:2: expected 'id<TAB>text'"),
      ("a\tx y\nb\t  \n", True, "in.txt:2: empty document text"),
      ("x y\n\nz\n", False, "in.txt:2: empty document text"),
      ("a\tx y\nb\ty\na\tz\n", True, "in.txt:3: duplicate document id 'a' (first at "),
  ]
  for text, id_column, match in cases:
    with pytest.raises(UserError, match=match.replace("(", r"\(")):
      _create(tmp_path, "pv_dbow", text, doc_id_column=id_column, min_freq=1)
    assert not os.path.exists(tmp_path / "out_pv_dbow_1" / layout.META_NAME)
  out, meta = _create(tmp_path, "pv_dm", good, doc_id_column=True, min_freq=1)
  assert meta["docs"]["size"] == 2
  with pytest.raises(UserError, match="--doc_id_column is for --model=pv_dbow or pv_dm"):
    _create(tmp_path, "cbow", good, doc_id_column=True)
  with pytest.raises(UserError, match="--layout='center' is for --model=skipgram only"):
    _create(tmp_path, "cbow", good, layout="center")


def test_document_errors_far_into_a_big_file_name_the_right_line(tmp_path, monkeypatch):
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(corpus_lib, "CHUNK_BYTES", 64)
  text = "".join(f"d{i}\tw{i % 5} w{i % 3}\n" for i in range(300)) + "d7\tw1\n"
  with pytest.raises(UserError, match=r"in.txt:301: duplicate document id 'd7' \(first at "
                                      r".*in.txt:8\)"):
    _create(tmp_path, "pv_dbow", text, doc_id_column=True, min_freq=1, workers=2)


def test_cli_unknown_model_and_pv_errors_are_one_line(tmp_path):
  out = str(tmp_path / "out")
  assert_one_line_error([f"--input_file={TINY}", f"--output_dir={out}", "--model=glove"],
                        "--model='glove': must be one of skipgram, cbow, pv_dbow, pv_dm", out)
  bad = tmp_path / "bad.tsv"
  bad.write_text("a\tx y\nb x y\n")
  assert_one_line_error([f"--input_file={bad}", f"--output_dir={out}", "--model=pv_dm",
                         "--doc_id_column", "--min_freq=1"], "bad.tsv:2: expected", out)


@pytest.mark.parametrize("text", [
    b"a b\n\nc a b\nb a\n",          # final newline: one more empty sentence
    b"a b\n\nc a b\nb a",            # no final newline
    b"a b\r\nc \xff a\nb a b\n",     # invalid UTF-8 in the middle: line-by-line path
    b"\n\na a b\n\n",
])
def test_read_chunks_and_workers_do_not_change_the_corpus(tmp_path, text):
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  p = tmp_path / "c.txt"
  p.write_bytes(text * 5)
  runs = [corpus_lib.load_corpus([str(p)] * 2, 1, "replace", num_workers=w, chunk_bytes=c)
          for w, c in ((1, 1 << 20), (1, 1), (2, 3), (3, 7))]
  ref = runs[0]
  assert ref.num_sentences == 2 * len((text * 5).split(b"\n"))  # d2l's split('\n')
  for r in runs[1:]:
    assert r.tokens == ref.tokens and r.counts.tolist() == ref.counts.tolist()
    assert r.ids.tolist() == ref.ids.tolist() and r.lengths.tolist() == ref.lengths.tolist()
    assert [r.line_of[i] for i in range(r.num_sentences)] == \
        [ref.line_of[i] for i in range(ref.num_sentences)]
  # Workers may leave each chunk's ids in files (the main process then holds
  # paths): the same ids, read back where they are used.
  ids_dir = tmp_path / "ids"
  ids_dir.mkdir()
  counted = corpus_lib.count_corpus([str(p)] * 2, 1, "replace", num_workers=2, chunk_bytes=3,
                                    ids_dir=str(ids_dir))
  held = [ids for _, ids in counted.pieces]
  assert all(isinstance(ids, str) for ids in held)  # ranges read line by line too
  ids = [corpus_lib.PieceIds(g, local).lines(0, n)
         for (g, local), n in zip(counted.pieces, counted.piece_lines)]
  assert np.concatenate([i for i, _ in ids]).tolist() == ref.ids.tolist()
  assert np.concatenate([n for _, n in ids]).tolist() == ref.lengths.tolist()
  assert corpus_lib.file_chunks(str(p), 4)[-1][1] == len(text * 5)
  data = p.read_bytes()
  assert all(data[b - 1:b] == b"\n" for _, b in corpus_lib.file_chunks(str(p), 4)[:-1])


def test_slot_counts_merge_in_first_occurrence_order():
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  m = corpus_lib._SlotCounts()  # pylint: disable=protected-access
  m.add(["a", "b"], np.array([2, 1]))
  assert m.add(["d", "a", "c"], np.array([1, 1, 2])).tolist() == [2, 0, 3]
  assert list(m.slot) == ["a", "b", "d", "c"] and m.total[:4].tolist() == [3, 1, 1, 2]
  # Growing past the first table keeps what was counted.
  many = [f"w{i}" for i in range(3000)]
  m.add(many, np.ones(3000, np.int64))
  assert m.total[:4].tolist() == [3, 1, 1, 2] and m.total[4:3004].sum() == 3000


def _messy_lines(n=90):
  """Lines (bytes) with invalid UTF-8 in several places, one ending in CR."""
  lines = []
  for i in range(n):
    words = f"w{i % 7} w{i % 5} the cat".encode()
    lines.append(words + b" \xff\xfe x" if i % 9 == 4 else b"\xc3" if i % 13 == 6 else
                 words + b"\r" if i == 20 else words)
  return lines


def _small_read_chunks(monkeypatch, size=64):
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(corpus_lib, "CHUNK_BYTES", size)
  monkeypatch.setattr(corpus_lib, "MIN_CHUNK_BYTES", size)


@pytest.mark.parametrize("mode", ["replace", "skip_line"])
def test_a_file_with_invalid_utf8_is_read_in_byte_ranges_like_the_clean_text(tmp_path, mode):
  """Invalid lines in many byte ranges, read by 1 or 2 workers: the corpus
  of the text as decoded line by line (U+FFFD, or the line left out), with
  the file's own line numbers and decode counts."""
  from textrecords.files import text_input  # pylint: disable=import-outside-toplevel
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  lines = _messy_lines()
  p, clean = tmp_path / "m.txt", tmp_path / "clean.txt"
  p.write_bytes(b"\n".join(lines) + b"\n")
  kept = []
  for i, raw in enumerate(lines):
    try:
      kept.append((i + 1, raw.decode("utf-8")))
    except UnicodeDecodeError:
      if mode == "replace":
        kept.append((i + 1, raw.decode("utf-8", errors="replace")))
  clean.write_text("".join(t + "\n" for _, t in kept), encoding="utf-8")
  ref = corpus_lib.load_corpus([str(clean)], 1)
  ref_lines = [n for n, _ in kept] + [len(lines) + 1]  # d2l's empty sentence after the end
  assert len(corpus_lib.file_chunks(str(p), 40)) > 20
  for workers, chunk_bytes in ((1, 1 << 20), (1, 40), (2, 40), (2, 97)):
    counts = text_input.DecodeErrorCounts()
    c = corpus_lib.load_corpus([str(p)], 1, mode, num_workers=workers,
                               chunk_bytes=chunk_bytes, counts=counts)
    assert c.tokens == ref.tokens and c.counts.tolist() == ref.counts.tolist()
    assert c.ids.tolist() == ref.ids.tolist() and c.lengths.tolist() == ref.lengths.tolist()
    assert [c.line_of[i] for i in range(c.num_sentences)] == [(str(p), n) for n in ref_lines]
    bad = len(lines) - sum(1 for raw in lines if raw.isascii())
    assert counts.as_tuple() == ((bad, 0) if mode == "replace" else (0, bad))


def test_skip_line_drops_an_invalid_line_holding_a_nul_byte(tmp_path):
  """skip_line drops a line that is not UTF-8 even when it also holds a NUL
  byte (past the first 8 KiB): the corpus of the file without it; a NUL in
  a line that is kept is still the one-line error naming that line, one in
  the first 8 KiB the binary-file error."""
  from textrecords.files import text_input  # pylint: disable=import-outside-toplevel
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  lines = [f"w{i % 7} the cat on the mat".encode() for i in range(600)]  # 15 kB
  for bad, name in ((b"x \xff", "ref.txt"), (b"x \xff \x00 y", "nul.txt")):
    (tmp_path / name).write_bytes(b"\n".join(lines[:450] + [bad] + lines[451:]) + b"\n")
  ref = corpus_lib.load_corpus([str(tmp_path / "ref.txt")], 1, "skip_line")
  for chunk_bytes in (1 << 20, 2048):
    counts = text_input.DecodeErrorCounts()
    got = corpus_lib.load_corpus([str(tmp_path / "nul.txt")], 1, "skip_line",
                                 chunk_bytes=chunk_bytes, counts=counts)
    assert got.tokens == ref.tokens and got.ids.tolist() == ref.ids.tolist()
    assert got.line_of[450] == (str(tmp_path / "nul.txt"), 452) and counts.skipped == 1
  (tmp_path / "kept.txt").write_bytes(b"\n".join(lines[:450] + [b"x \x00 y", b"z \xff"]
                                                 + lines[452:]) + b"\n")
  with pytest.raises(UserError, match=r"kept.txt:451: NUL byte in the line"):
    corpus_lib.load_corpus([str(tmp_path / "kept.txt")], 1, "skip_line", chunk_bytes=2048)
  (tmp_path / "head.txt").write_bytes(b"\n".join([b"x \xff \x00 y"] + lines) + b"\n")
  with pytest.raises(UserError, match=r"head.txt: looks like a binary file"):
    corpus_lib.load_corpus([str(tmp_path / "head.txt")], 1, "skip_line", chunk_bytes=2048)


@pytest.mark.parametrize("model,mode", [("skipgram", "replace"), ("cbow", "skip_line"),
                                        ("pv_dbow", "skip_line"), ("pv_dm", "replace")])
def test_invalid_utf8_in_many_ranges_same_bytes_for_1_and_2_workers(tmp_path, monkeypatch,
                                                                    model, mode):
  src = tmp_path / "messy.txt"
  src.write_bytes(b"\n".join(_messy_lines()) + b"\n")

  def run(workers):
    out = str(tmp_path / f"messy_{model}_{workers}")
    meta = generator.create(W2vConfig(input_file=str(src), output_dir=out, model=model,
                                     num_workers=workers, num_shards=2, quiet=True, min_freq=1,
                                     random_seed=3, on_decode_error=mode)).meta
    return out, meta

  one, meta_one = run(1)
  _small_read_chunks(monkeypatch)
  two, meta_two = run(2)
  assert meta_one["counts"] == meta_two["counts"]
  bad = sum(1 for raw in _messy_lines() if not raw.isascii())
  assert meta_one["counts"]["replaced_lines" if mode == "replace" else "skipped_lines"] == bad
  for name in visible(one):
    if name != layout.META_NAME:
      with open(os.path.join(one, name), "rb") as a, open(os.path.join(two, name), "rb") as b:
        assert a.read() == b.read(), name


def test_errors_in_later_byte_ranges_name_the_files_line(tmp_path, monkeypatch):
  _small_read_chunks(monkeypatch)
  lines = [f"w{i % 7} w{i % 5} the cat on the mat".encode() for i in range(600)]  # 15 kB
  cases = [(dict(), 401, b"bad \xff", "invalid UTF-8 at byte 4 of the line"),
           (dict(on_decode_error="replace"), 502, b"a \x00 b", "NUL byte in the line"),
           (dict(model="pv_dbow", on_decode_error="skip_line"), 550, b"   ",
            "empty document text")]
  for kw, lineno, line, message in cases:
    bad = list(lines)
    bad[lineno - 1] = line
    for i in range(3, 500, 50):  # skipped or replaced lines before it
      bad[i] = b"x \xfe"
    if kw.get("on_decode_error") is None:
      bad = lines[:lineno - 1] + [line] + lines[lineno:]
    src = tmp_path / "in.txt"
    src.write_bytes(b"\n".join(bad) + b"\n")
    with pytest.raises(UserError, match=f"in.txt:{lineno}: {message}"):
      generator.create(W2vConfig(input_file=str(src), output_dir=str(tmp_path / "o"),
                                num_workers=2, quiet=True, min_freq=1, **kw))
    assert not os.path.exists(tmp_path / "o")


def test_no_noise_word_error_names_the_line_after_skipped_lines(tmp_path, monkeypatch):
  _small_read_chunks(monkeypatch, 16)
  src = tmp_path / "two.txt"
  src.write_bytes(b"a\nbad \xff\n" * 20 + b"a b a b a\n")
  with pytest.raises(UserError, match=r"two.txt:41: a center.s contexts cover every one"):
    generator.create(W2vConfig(input_file=str(src), output_dir=str(tmp_path / "o"), min_freq=1,
                              subsample_t=1.0, num_workers=2, quiet=True,
                              on_decode_error="skip_line"))
