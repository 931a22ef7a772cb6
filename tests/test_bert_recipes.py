"""bert_data recipes: sentence-order prediction and RoBERTa-style packing invariants."""

import random

import numpy as np
import pytest

from bert_data import packing
from bert_data.documents import Corpus
from bert_data.sentence_order import sop_spans_from_document


def _random_corpus(seed: int, num_docs: int = 60, max_len: int = 40) -> Corpus:
  rng = random.Random(seed)
  seg_lens, doc_nsegs = [], []
  for _ in range(num_docs):
    k = rng.randint(1, 8)
    doc_nsegs.append(k)
    seg_lens.extend(rng.randint(1, max_len) for _ in range(k))
  seg_starts = np.concatenate([[0], np.cumsum(seg_lens)]).astype(np.int64)
  doc_starts = np.concatenate([[0], np.cumsum(doc_nsegs)]).astype(np.int64)
  tokens = np.arange(int(seg_starts[-1]), dtype=np.int32) % 1000 + 5
  return Corpus(tokens, seg_starts, doc_starts)


@pytest.mark.parametrize("max_num_tokens,short_seq_prob", [(61, 0.1), (13, 0.0), (2, 0.5)])
def test_sop_segments_adjacent_same_document_and_fit(max_num_tokens, short_seq_prob):
  corpus = _random_corpus(3)
  labels = []
  for d in range(corpus.num_docs):
    bounds = corpus.segment_bounds(d)
    spans = sop_spans_from_document(bounds, random.Random(d), max_num_tokens, short_seq_prob)
    if bounds[-1] - bounds[0] >= 2:
      assert spans, "every document with two tokens makes an instance"
    for f0, f1, s0, s1, swapped in spans:
      assert f0 < f1 and s0 < s1 and (f1 - f0) + (s1 - s0) <= max_num_tokens
      assert bounds[0] <= min(f0, s0) and max(f1, s1) <= bounds[-1]
      if swapped:   # the later text first: second segment ends where the first begins
        assert s1 == f0
      else:
        assert f1 == s0
      labels.append(swapped)
  # Instances tile the document's chunks in order (none overlap).
  n = len(labels)
  assert n > 100
  # Balanced labels: Binomial(n, 1/2) within 4 standard deviations.
  assert abs(sum(labels) - n / 2) < 4 * (n / 4) ** 0.5


def test_sop_swaps_with_probability_one_half_and_keeps_junction():
  labels = []
  for seed in range(2000):
    spans = sop_spans_from_document([0, 50, 100], random.Random(seed), 40, 0.0)
    (f0, f1, s0, s1, swapped), = spans
    # Truncation trims A's front and B's back: the junction at 50 stays.
    assert (f0, s1) == (50, 50) if swapped else (f1, s0) == (50, 50)
    assert (f1 - f0) + (s1 - s0) == 40
    labels.append(swapped)
  assert abs(sum(labels) - 1000) < 4 * 500 ** 0.5


def _cost(p, k, full):
  t0, t1 = p.token_range(k)
  return t1 - t0 + (len(p.doc_breaks(k)) if full else 0)


@pytest.mark.parametrize("mode", packing.PACKING_MODES)
@pytest.mark.parametrize("max_seq_length", [16, 37, 128])
def test_packing_contiguous_and_full_except_at_document_or_corpus_ends(mode, max_seq_length):
  corpus = _random_corpus(7, max_len=50)
  p = packing.pack(corpus.seg_starts, corpus.doc_starts, max_seq_length, mode)
  full = mode == "full_sentences"
  budget = max_seq_length - 2
  rows = p.instances
  # Contiguous: instances tile all pieces in order, so all text is used once.
  assert rows[0, 0] == 0 and rows[-1, 1] == len(p.doc_first)
  assert (rows[1:, 0] == rows[:-1, 1]).all() and (rows[:, 1] > rows[:, 0]).all()
  assert p.piece_starts[0] == 0 and p.piece_starts[-1] == corpus.num_tokens
  doc_token_starts = set(corpus.seg_starts[corpus.doc_starts[:-1]].tolist())
  for k in range(p.num_instances):
    cost = _cost(p, k, full)
    assert cost <= budget
    if not full:
      assert len(p.doc_breaks(k)) == 0
    if k + 1 == p.num_instances:
      continue
    _, end = p.token_range(k)
    nxt = int(p.piece_starts[rows[k + 1, 0] + 1]) - end   # the next piece's tokens
    if not full and end in doc_token_starts:
      continue   # a document ended: doc_sentences stops there
    sep = 1 if (full and end in doc_token_starts) else 0
    assert cost + sep + nxt > budget, "the next piece would have fit"
  # Pieces: sentences longer than the budget are cut, none is longer.
  assert (np.diff(p.piece_starts) <= budget).all()


def test_packing_rows_hold_the_text_with_sep_between_documents():
  corpus = _random_corpus(11, num_docs=20, max_len=10)
  p = packing.pack(corpus.seg_starts, corpus.doc_starts, 64, "full_sentences")
  ids, lengths, special = packing.instance_ids(corpus.tokens, p, range(p.num_instances),
                                               1, 2, 64)
  text = []
  for k in range(p.num_instances):
    row = ids[k, :lengths[k]].tolist()
    assert row[0] == 1 and row[-1] == 2 and not ids[k, lengths[k]:].any()
    assert np.flatnonzero(special[k]).tolist() == [i for i, t in enumerate(row) if t in (1, 2)]
    text.extend(t for t in row if t not in (1, 2))
  assert text == corpus.tokens.tolist()
  assert p.num_instances < corpus.num_docs  # documents share instances
  assert any(len(p.doc_breaks(k)) for k in range(p.num_instances))


# ---------------------------------------------------------------- end to end

import json  # noqa: E402  pylint: disable=wrong-import-position
import os  # noqa: E402  pylint: disable=wrong-import-position

from conftest import SAMPLE_TEXT, VOCAB, error_lines, run_cli  # noqa: E402  pylint: disable=wrong-import-position

from bert_data import generator  # noqa: E402  pylint: disable=wrong-import-position
from bert_data import schema as S  # noqa: E402  pylint: disable=wrong-import-position
from bert_data.config import BertConfig  # noqa: E402  pylint: disable=wrong-import-position
from bert_data.tokenizer import WordPieceTokenizer  # noqa: E402  pylint: disable=wrong-import-position
from textrecords.files import tfrecord  # noqa: E402  pylint: disable=wrong-import-position
from textrecords.wire import example_decoder

SAMPLE_CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "bert_data", "sample", "sample_corpus.txt")
CLS, SEP = 101, 102


def _create(tmp_path, name, workers, **kw):
  out = str(tmp_path / name / "t.tfrecord")
  kw.setdefault("max_seq_length", 64)
  kw.setdefault("max_predictions_per_seq", 10)
  generator.create(BertConfig(input_files=(SAMPLE_CORPUS,), output_files=(out,),
                             vocab_file=VOCAB, num_workers=workers, **kw))
  return out


def _unmasked(rec):
  n = sum(rec[S.INPUT_MASK])
  ids = list(rec[S.INPUT_IDS][:n])
  for p, label, w in zip(rec[S.MASKED_LM_POSITIONS], rec[S.MASKED_LM_IDS],
                         rec[S.MASKED_LM_WEIGHTS]):
    if w > 0:
      ids[p] = label
  return ids, rec[S.SEGMENT_IDS][:n]


def _documents():
  tok = WordPieceTokenizer(VOCAB)
  docs, cur = [], []
  with open(SAMPLE_CORPUS, encoding="utf-8") as f:
    for line in f:
      if not line.strip():
        if cur:
          docs.append(cur)
        cur = []
      else:
        cur.extend(tok.encode(line.strip()))
  if cur:
    docs.append(cur)
  return [" " + " ".join(map(str, d)) + " " for d in docs]


def _in_a_document(ids, docs):
  needle = " " + " ".join(map(str, ids)) + " "
  return any(needle in d for d in docs)


def test_sop_end_to_end_adjacent_balanced_same_bytes_any_workers(tmp_path):
  one = _create(tmp_path, "w1", 1, sentence_order=True, dupe_factor=3)
  two = _create(tmp_path, "w2", 2, sentence_order=True, dupe_factor=3)
  assert open(one, "rb").read() == open(two, "rb").read()
  meta = json.load(open(one + ".meta.json"))
  assert meta["sentence_task"] == "sop"
  docs = _documents()
  labels = []
  for raw in tfrecord.read_records(one):
    rec = example_decoder.decode_example(raw)
    ids, seg = _unmasked(rec)
    num_a = seg.count(0)
    first, second = ids[1:num_a - 1], ids[num_a:-1]
    label = rec[S.NEXT_SENTENCE_LABELS][0]
    # B is the text right after A in the same document; label 1 = swapped.
    assert _in_a_document(second + first if label else first + second, docs)
    labels.append(label)
  n = len(labels)
  assert n > 200 and abs(sum(labels) - n / 2) < 4 * (n / 4) ** 0.5


def test_sop_with_dynamic_masking(tmp_path):
  """--sentence_order --masking=dynamic: the static SOP instances, unmasked, SOP
  labels kept; make_dataset draws the masks and passes the labels through."""
  pytest.importorskip("tensorflow")
  import bert_data  # pylint: disable=import-outside-toplevel
  kw = dict(sentence_order=True, masking="dynamic", dupe_factor=1)
  dyn = _create(tmp_path, "d", 1, **kw)
  assert open(dyn, "rb").read() == open(_create(tmp_path, "d2", 2, **kw), "rb").read()
  static = _create(tmp_path, "s", 1, sentence_order=True, dupe_factor=1)
  meta = json.load(open(dyn + ".meta.json"))
  assert meta["sentence_task"] == "sop" and meta["masking"]["mode"] == "dynamic"
  records = [example_decoder.decode_example(r) for r in tfrecord.read_records(dyn)]
  assert all(S.MASKED_LM_POSITIONS not in r and S.RECORD_KEY in r for r in records)
  stored = [(tuple(r[S.INPUT_IDS][:sum(r[S.INPUT_MASK])]),
             tuple(r[S.SEGMENT_IDS][:sum(r[S.INPUT_MASK])]), r[S.NEXT_SENTENCE_LABELS][0])
            for r in records]
  want = []
  for raw in tfrecord.read_records(static):
    rec = example_decoder.decode_example(raw)
    ids, seg = _unmasked(rec)
    want.append((tuple(ids), tuple(seg), rec[S.NEXT_SENTENCE_LABELS][0]))
  assert sorted(stored) == sorted(want) and len(stored) > 50
  labels = [s[2] for s in stored]
  assert 0 < sum(labels) < len(labels)  # both orders
  got, masked = [], 0
  for x, y, w in bert_data.make_dataset(dyn, 16, training=False, seed=1):
    got += y["next_sentence"].numpy()[:, 0].tolist()
    ids, pos = x["input_ids"].numpy(), x["masked_lm_positions"].numpy()
    wt, lab = w["masked_lm"].numpy(), y["masked_lm"].numpy()
    for i in range(ids.shape[0]):
      k = int(wt[i].sum())
      assert k >= 1 and not np.isin(lab[i, :k], [CLS, SEP]).any()
      orig = ids[i].copy()
      orig[pos[i, :k]] = lab[i, :k]
      n = int(x["input_mask"].numpy()[i].sum())
      assert tuple(orig[:n]) == stored[len(got) - ids.shape[0] + i][0]  # records in order
      masked += k
  assert got == labels and masked > len(stored)


@pytest.mark.parametrize("mode", packing.PACKING_MODES)
def test_packing_end_to_end_no_label_all_text_same_bytes_any_workers(tmp_path, mode):
  kw = dict(next_sentence=False, packing=mode, dupe_factor=1)
  one = _create(tmp_path, "w1", 1, **kw)
  two = _create(tmp_path, "w2", 2, **kw)
  assert open(one, "rb").read() == open(two, "rb").read()
  wwm = _create(tmp_path, "wwm", 1, do_whole_word_mask=True, **kw)
  meta = json.load(open(one + ".meta.json"))
  assert meta["sentence_task"] == "none" and meta["packing"] == mode
  assert [f["name"] for f in meta["schema"]] == [s.name for s in S.bert_schema(64, 10)][:-1]
  docs = _documents()
  for path in (one, wwm):
    text_tokens = 0
    for raw in tfrecord.read_records(path):
      rec = example_decoder.decode_example(raw)
      assert S.NEXT_SENTENCE_LABELS not in rec
      ids, seg = _unmasked(rec)
      assert not any(seg) and ids[0] == CLS and ids[-1] == SEP and len(ids) <= 64
      # Masks never fall on [CLS]/[SEP] (inner ones separate documents).
      for p, w in zip(rec[S.MASKED_LM_POSITIONS], rec[S.MASKED_LM_WEIGHTS]):
        assert w == 0 or ids[p] not in (CLS, SEP)
      parts = " ".join(map(str, ids[1:-1])).split(f" {SEP} ") if len(ids) > 2 else []
      if mode == "doc_sentences":
        assert len(parts) == 1
      for part in parts:
        assert _in_a_document(part.split(), docs)
        text_tokens += len(part.split())
    assert text_tokens == sum(len(d.split()) for d in docs)  # every token once per dupe


def test_packed_records_parse_without_next_sentence(tmp_path):
  tf = pytest.importorskip("tensorflow")
  del tf
  import bert_data  # pylint: disable=import-outside-toplevel
  out = _create(tmp_path, "p", 1, next_sentence=False, packing="full_sentences", dupe_factor=1)
  x, y, w = next(iter(bert_data.make_dataset(out, 4, training=False)))
  assert set(y) == {"masked_lm"} and set(w) == {"masked_lm"}
  assert x["input_ids"].shape == (4, 64)


def test_recipe_flag_errors_one_line_nothing_written(tmp_path):
  no_pieces = tmp_path / "vocab.txt"
  no_pieces.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
  out = tmp_path / "o" / "t.tfrecord"
  cases = [
      (["--sentence_order", "--next_sentence=false", "--packing=full_sentences"],
       "--sentence_order"),
      (["--packing=full_sentences"], "--next_sentence=false"),
      (["--next_sentence=false"], "--packing"),
      (["--sentence_order", "--reference_compatible"], "--reference_compatible"),
      (["--next_sentence=false", "--packing=doc_sentences", "--reference_compatible"],
       "--reference_compatible"),
      (["--packing=both", "--next_sentence=false"], "packing"),
      ([f"--vocab_file={no_pieces}", "--do_whole_word_mask"], "## pieces"),
  ]
  for flags, says in cases:
    vocab = [] if any(f.startswith("--vocab_file") for f in flags) else [f"--vocab_file={VOCAB}"]
    r = run_cli("bert_data.create", f"--input_file={SAMPLE_TEXT}", f"--output_file={out}",
                "--dupe_factor=1", "--quiet", *vocab, *flags)
    assert r.returncode == 2, (flags, r.stderr)
    lines = error_lines(r.stderr)
    assert len(lines) == 1 and says in lines[0], (flags, lines)
    assert not out.parent.exists() or os.listdir(out.parent) == []


@pytest.mark.parametrize("whole_word", [False, True])
def test_packing_with_dynamic_masking(tmp_path, whole_word):
  pytest.importorskip("tensorflow")
  import bert_data  # pylint: disable=import-outside-toplevel
  kw = dict(next_sentence=False, packing="full_sentences", dupe_factor=1, masking="dynamic",
            do_whole_word_mask=whole_word)
  one = _create(tmp_path, "w1", 1, **kw)
  two = _create(tmp_path, "w2", 2, **kw)
  assert open(one, "rb").read() == open(two, "rb").read()
  rec = example_decoder.decode_example(next(iter(tfrecord.read_records(one))))
  assert S.NEXT_SENTENCE_LABELS not in rec and S.RECORD_KEY in rec
  assert (S.WORD_STARTS in rec) == whole_word
  masked = 0
  for x, y, w in bert_data.make_dataset(one, 8, training=False, seed=3).take(4):
    assert set(y) == {"masked_lm"} and set(w) == {"masked_lm"}
    labels = y["masked_lm"].numpy()[w["masked_lm"].numpy() > 0]
    assert labels.size and not np.isin(labels, [CLS, SEP]).any()  # [SEP]s never masked
    masked += labels.size
  assert masked > 4 * 8 * 5
