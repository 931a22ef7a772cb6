"""CBOW and paragraph-vector records (no TensorFlow): invariants, document ids, bad input."""

import os

import numpy as np
import pytest

from textrecords.wire import example_decoder
from textrecords.datasets import layout
from textrecords.files import tfrecord
from textrecords.errors import UserError
from w2v_data import pipeline
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
  meta = pipeline.create(W2vConfig(input_file=str(src), output_dir=out, model=model,
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
  monkeypatch.setattr(pipeline, "CHUNK_SENTENCES", 7)
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
  clean = b"\xff" not in text
  assert all(isinstance(ids, str) for ids in held) if clean else \
      not any(isinstance(ids, str) for ids in held)  # the line-by-line path holds arrays
  ids = [corpus_lib.PieceIds(g, local).lines(0, n)
         for (g, local), n in zip(counted.pieces, counted.piece_lines)]
  assert np.concatenate([i for i, _ in ids]).tolist() == ref.ids.tolist()
  assert np.concatenate([n for _, n in ids]).tolist() == ref.lengths.tolist()
  assert corpus_lib.file_chunks(str(p), 4)[-1][1] == len(text * 5)
  data = p.read_bytes()
  assert all(data[b - 1:b] == b"\n" for _, b in corpus_lib.file_chunks(str(p), 4)[:-1])


def test_slot_counts_undo_takes_a_files_chunks_back_out():
  from w2v_data import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  m = corpus_lib._SlotCounts()  # pylint: disable=protected-access
  m.add(["a", "b"], np.array([2, 1]))
  before_slots, before_total = dict(m.slot), m.total[:2].copy()
  mark = m.mark()
  chunks = [corpus_lib.ChunkCounts(tokens=t, counts=np.array(c), local_ids=np.zeros(0, np.int32),
                                   num_lines=1)
            for t, c in ((["b", "c"], [4, 1]), (["d", "a", "c"], [1, 1, 2]))]
  slots = [m.add(c.tokens, c.counts) for c in chunks]
  assert m.total[:4].tolist() == [3, 5, 3, 1]
  m.undo(mark, chunks, slots)
  assert m.slot == before_slots and list(m.slot) == ["a", "b"]
  assert m.total[:2].tolist() == before_total.tolist() and not m.total[2:].any()
  # Growing past the first table keeps what was counted.
  many = [f"w{i}" for i in range(3000)]
  m.add(many, np.ones(3000, np.int64))
  assert m.total[:2].tolist() == [2, 1] and m.total[2:3002].sum() == 3000
