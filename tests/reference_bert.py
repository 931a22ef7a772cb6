"""An independent, deliberately plain oracle of the reference BERT algorithm.

Written from ../shared/spec/bert_reference.md (sections 1-5 and 7), on token
strings, with one `random.Random` and Python's own `shuffle`/`randint`, and
sharing no code with `bert_data`: tests compare the pipeline's
reference-compatible output with it on generated corpora.
"""

import random

from reference_tokenizer import ReferenceTokenizer


def read_documents(paths, tokenizer):
  docs = [[]]
  for path in paths:
    with open(path, "rb") as f:
      data = f.read().replace(b"\r", b"")
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
      lines.pop()
    for raw in lines:
      line = raw.decode("utf-8").strip()
      if not line:
        docs.append([])
        continue
      tokens = tokenizer.tokenize(line)
      if tokens:
        docs[-1].append(tokens)
  return [d for d in docs if d]


def truncate(a, b, max_num_tokens, rng):
  while len(a) + len(b) > max_num_tokens:
    t = a if len(a) > len(b) else b
    if rng.random() < 0.5:
      del t[0]
    else:
      t.pop()


def mask(tokens, rng, flags, vocab_words):
  cand = []
  for i, tok in enumerate(tokens):
    if tok in ("[CLS]", "[SEP]"):
      continue
    if flags["do_whole_word_mask"] and cand and tok.startswith("##"):
      cand[-1].append(i)
    else:
      cand.append([i])
  rng.shuffle(cand)
  out = list(tokens)
  n = min(flags["max_predictions_per_seq"],
          max(1, int(round(len(tokens) * flags["masked_lm_prob"]))))
  chosen = []
  covered = set()
  for group in cand:
    if len(chosen) >= n:
      break
    if len(chosen) + len(group) > n:
      continue
    if any(i in covered for i in group):
      continue
    for i in group:
      covered.add(i)
      if rng.random() < 0.8:
        rep = "[MASK]"
      elif rng.random() < 0.5:
        rep = tokens[i]
      else:
        rep = vocab_words[rng.randint(0, len(vocab_words) - 1)]
      out[i] = rep
      chosen.append((i, tokens[i]))
  chosen.sort()
  return out, [c[0] for c in chosen], [c[1] for c in chosen]


def from_document(docs, d, rng, flags, vocab_words):
  doc = docs[d]
  max_num = flags["max_seq_length"] - 3
  target = max_num
  if rng.random() < flags["short_seq_prob"]:
    target = rng.randint(2, max_num)
  result, chunk, length, i = [], [], 0, 0
  while i < len(doc):
    chunk.append(doc[i])
    length += len(doc[i])
    if i == len(doc) - 1 or length >= target:
      if chunk:
        a_end = 1
        if len(chunk) >= 2:
          a_end = rng.randint(1, len(chunk) - 1)
        a = [t for seg in chunk[:a_end] for t in seg]
        b = []
        if len(chunk) == 1 or rng.random() < 0.5:
          random_next = True
          target_b = target - len(a)
          for _ in range(10):
            r = rng.randint(0, len(docs) - 1)
            if r != d:
              break
          other = docs[r]
          start = rng.randint(0, len(other) - 1)
          for j in range(start, len(other)):
            b.extend(other[j])
            if len(b) >= target_b:
              break
          i -= len(chunk) - a_end
        else:
          random_next = False
          for seg in chunk[a_end:]:
            b.extend(seg)
        truncate(a, b, max_num, rng)
        tokens = ["[CLS]"] + a + ["[SEP]"] + b + ["[SEP]"]
        segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        tokens, positions, labels = mask(tokens, rng, flags, vocab_words)
        result.append((tokens, segments, random_next, positions, labels))
      chunk, length = [], 0
    i += 1
  return result


def reference_records(paths, vocab_file, flags):
  """The reference's records as dicts of feature lists, in output order."""
  tok = ReferenceTokenizer(vocab_file, flags["do_lower_case"])
  vocab = tok.vocab
  vocab_words = list(vocab.keys())
  rng = random.Random(flags["random_seed"])
  docs = read_documents(paths, tok)
  rng.shuffle(docs)
  instances = []
  for _ in range(flags["dupe_factor"]):
    for d in range(len(docs)):
      instances.extend(from_document(docs, d, rng, flags, vocab_words))
  rng.shuffle(instances)
  seq, pred = flags["max_seq_length"], flags["max_predictions_per_seq"]
  out = []
  for tokens, segments, random_next, positions, labels in instances:
    ids = [vocab[t] for t in tokens]
    out.append({
        "input_ids": ids + [0] * (seq - len(ids)),
        "input_mask": [1] * len(ids) + [0] * (seq - len(ids)),
        "segment_ids": segments + [0] * (seq - len(ids)),
        "masked_lm_positions": positions + [0] * (pred - len(positions)),
        "masked_lm_ids": [vocab[t] for t in labels] + [0] * (pred - len(labels)),
        "masked_lm_weights": [1.0] * len(labels) + [0.0] * (pred - len(labels)),
        "next_sentence_labels": [1 if random_next else 0],
    })
  return out
