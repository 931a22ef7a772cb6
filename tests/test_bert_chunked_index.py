"""bert_data.chunked_index: the index laid end to end from per-chunk pieces
equals `documents.CorpusBuilder`'s over the whole corpus, and reads in pages."""

import os
import random

import numpy as np

from bert_data import chunked_index
from bert_data import documents
from bert_data import packing


def _pieces(tmp_path, lengths, cuts, tag):
  bounds = [0] + cuts + [len(lengths)]
  sizes = []
  for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
    data, fields = chunked_index.piece_bytes(lengths[a:b])
    path = os.path.join(tmp_path, f"{tag}-{k}.npz")
    with open(path, "wb") as f:
      f.write(data)
    sizes.append(chunked_index.PieceSizes(path, *fields))
  return sizes


def test_assembled_index_equals_the_builders(tmp_path):
  rng = random.Random(1)
  for trial in range(200):
    n = rng.randint(0, 60)
    lengths = np.array([rng.choice([-1, -1, 0, 1, 2, 5]) for _ in range(n)], np.int32)
    cuts = sorted(rng.sample(range(n + 1), min(n + 1, rng.randint(0, 6))))
    builder = documents.CorpusBuilder()
    builder.add_lengths(lengths)
    want = builder.build(np.zeros(int(lengths[lengths > 0].sum()), np.int32))
    seg, doc, offsets = chunked_index.assemble(_pieces(tmp_path, lengths, cuts, trial))
    assert np.asarray(seg).tolist() == want.seg_starts.tolist(), (lengths, cuts)
    assert np.asarray(doc).tolist() == want.doc_starts.tolist(), (lengths, cuts)
    assert [int(seg[i]) for i in range(len(seg))] == want.seg_starts.tolist()
    assert [int(doc[i]) for i in range(len(doc))] == want.doc_starts.tolist()
    assert seg[1:len(seg) - 1].tolist() == want.seg_starts[1:-1].tolist()
    assert offsets[-1] == want.tokens.size


def test_paged_array_reads_pages_and_keeps_few_loaded(tmp_path):
  lengths = np.array([3, 2, -1] * 50, np.int32)
  seg, _, _ = chunked_index.assemble(_pieces(tmp_path, lengths, list(range(6, 150, 6)), "p"))
  builder = documents.CorpusBuilder()
  builder.add_lengths(lengths)
  want = builder.build(np.zeros(250, np.int32)).seg_starts
  assert len(seg.pages) == 26  # [0], then one page per chunk
  assert [int(seg[i]) for i in range(len(seg))] == want.tolist()
  assert int(seg[-1]) == 250 and seg[7:40].tolist() == want[7:40].tolist()
  assert len(seg._cache) <= chunked_index.PagedArray._OPEN  # pylint: disable=protected-access


def test_packing_planned_per_chunk_equals_the_whole_corpus_plan(tmp_path):
  """`plan_packing` (one window per chunk, pages read per task) gives
  `packing.pack`'s instances over the whole index: long sentences cut into
  pieces, documents and open instances crossing chunk ends, empty chunks."""
  rng = random.Random(3)
  for trial in range(25):
    n = rng.randint(1, 40)
    lengths = np.array([rng.choice([-1, -1, 1, 2, 5, 9, 30, 70]) for _ in range(n)], np.int32)
    lengths[rng.randrange(n)] = 3  # at least one segment
    cuts = sorted(rng.sample(range(n + 1), min(n + 1, rng.randint(0, 8))))
    builder = documents.CorpusBuilder()
    builder.add_lengths(lengths)
    whole = builder.build(np.zeros(int(lengths[lengths > 0].sum()), np.int32))
    sizes = _pieces(tmp_path, lengths, cuts, trial)
    seg, doc, offsets = chunked_index.assemble(sizes)
    corpus = documents.Corpus(np.zeros(offsets[-1], np.int32), seg, doc)
    for mode in packing.PACKING_MODES:
      for max_seq_length in (8, 40):
        want = packing.pack(whole.seg_starts, whole.doc_starts, max_seq_length, mode)

        def write(name, data, tag=f"{trial}-{mode}-{max_seq_length}"):
          path = os.path.join(tmp_path, f"{tag}-{name}")
          with open(path, "wb") as f:
            f.write(data)
          return path

        got = chunked_index.plan_packing(corpus, sizes, max_seq_length, mode, write)
        n_inst = want.num_instances
        assert got.num_instances == n_inst, (lengths, cuts, mode)
        spans = [(0, n_inst)] + [(k, min(n_inst, k + rng.randint(1, 5)))
                                 for k in range(0, n_inst, 2)]
        for k0, k1 in spans:
          w, g = want.window(k0, k1), got.window(k0, k1)
          assert g.piece_starts.tolist() == w.piece_starts.tolist(), (lengths, cuts, mode, k0)
          assert g.doc_first.tolist() == w.doc_first.tolist(), (lengths, cuts, mode, k0)
          assert g.instances.tolist() == w.instances.tolist(), (lengths, cuts, mode, k0)
