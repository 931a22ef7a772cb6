"""bert_data.chunked_index: the index laid end to end from per-chunk pieces
equals `documents.CorpusBuilder`'s over the whole corpus, and reads in pages."""

import os
import random

import numpy as np

from bert_data import chunked_index
from bert_data import documents


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
