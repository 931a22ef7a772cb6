"""numba kernels of w2v_data's word2vec trainer: draws and SGD over a chunk of sentences.

`train_chunk` trains one chunk of sentences the way word2vec.c does, one
example after another: it draws the chunk's subsampling, window sizes and
noise words from one 64-bit seed (a splitmix64 stream; the caller derives
the seed from the run's seed, the epoch and the chunk), and applies each
example's SGD update before the next example is read. Everything runs on
one thread in a fixed order, so a chunk's result depends only on the
weights before it, the chunk and its seed: the same for any number of
TensorFlow threads or tf.data workers.

Models (codes of `MODEL_CODES`, create's kernels' own), with h the input vector of an example:
  skipgram: h = the input vector of each word in the center's window, target
      the center (word2vec.c's order: a pair's update lands on the context);
  cbow: h = the mean of the window words' input vectors, target the center;
  pv_dm: cbow with the document's vector in the mean;
  pv_dbow: h = the document's vector, targets each of its words.
Each target is scored with K noise words drawn with weight count**0.75 (a
noise word equal to the target is skipped); h's error is applied to every
input vector it came from, unscaled (word2vec.c's CBOW). The rate falls
linearly with the run's progress through its tokens, per sentence.
"""

import numpy as np
import numba

from w2v_data.kernel_loader import MODEL_CODES  # noqa: F401  pylint: disable=unused-import

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_MAX_LOGIT = 10.0  # sigmoid(+-10) is not 0 or 1 in float32: the loss stays finite
_FOLD = 1e-280  # a likelihood product this small is logged before it can underflow
_JIT = dict(nogil=True, cache=True, fastmath=True, error_model="numpy")


@numba.njit(**_JIT)
def _next(state):
  """The next 64-bit number of the splitmix64 stream in state[0]."""
  state[0] += _GOLDEN
  z = state[0]
  z = (z ^ (z >> np.uint64(30))) * _MIX1
  z = (z ^ (z >> np.uint64(27))) * _MIX2
  return z ^ (z >> np.uint64(31))


@numba.njit(**_JIT)
def _below(z, n):
  """An int uniform on [0, n) from the high 32 bits of z."""
  return np.int64(((z >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


@numba.njit(**_JIT)
def _noise(state, prob, alias):
  """A noise word drawn from the alias table (prob, alias) with one number of the stream."""
  z = _next(state)
  col = _below(z, prob.shape[0])
  if np.float64(z & _LOW32) * (1.0 / 4294967296.0) < prob[col]:
    return col
  return alias[col]


@numba.njit(**_JIT)
def _score(h, out, target, label, rate, grad):
  """One (h, target) logistic step: updates out[target] and adds h's error to grad.

  Returns the example's likelihood, sigmoid(+-logit) (float32 arithmetic
  throughout): the caller takes one log of a product of these.
  """
  row = out[target]
  f = np.float32(0.0)
  for d in range(h.shape[0]):
    f += h[d] * row[d]
  f = min(max(f, np.float32(-_MAX_LOGIT)), np.float32(_MAX_LOGIT))
  p = np.float32(1.0) / (np.float32(1.0) + np.exp(-f))
  g = (np.float32(label) - p) * np.float32(rate)
  for d in range(h.shape[0]):
    grad[d] += g * row[d]
  for d in range(h.shape[0]):
    row[d] += g * h[d]
  return p if label > 0.5 else np.float32(1.0) - p


@numba.njit(**_JIT)
def _targets(h, out, positive, k, prob, alias, state, rate, grad):
  """The positive word and k noise words against h; returns (loss sum, terms).

  The loss is -log of the product of the terms' likelihoods, one log an
  example; a product that falls below _FOLD (each likelihood is at least
  sigmoid(-_MAX_LOGIT), but up to 1001 of them can underflow float64) has
  its log taken then, and the product starts over.
  """
  grad[:] = 0.0
  likelihood = np.float64(_score(h, out, positive, 1.0, rate, grad))
  loss = 0.0
  terms = 1
  for _ in range(k):
    w = _noise(state, prob, alias)
    if w != positive:
      likelihood *= _score(h, out, w, 0.0, rate, grad)
      terms += 1
      if likelihood < _FOLD:
        loss -= np.log(likelihood)
        likelihood = 1.0
  return loss - np.log(likelihood), terms


@numba.njit(**_JIT)
def _kept(tokens, t0, t1, keep, state, buf):
  """Subsamples tokens[t0:t1] into buf (keep[id]: probability; None-like: keep all)."""
  n = 0
  for t in range(t0, t1):
    w = tokens[t]
    if keep.shape[0] == 0 or np.float64(_next(state) >> np.uint64(11)) * (
        1.0 / 9007199254740992.0) < keep[w]:
      buf[n] = w
      n += 1
  return n


@numba.njit(**_JIT)
def _sentence(model, sen, n, doc, w_in, w_out, docs, prob, alias, window, k, state, rate,
              h, grad):
  """Trains one subsampled sentence sen[:n]; returns (loss sum, terms, examples)."""
  loss, terms, examples = 0.0, 0, 0
  dim = w_in.shape[1]
  for i in range(n):
    if model == 3:  # pv_dbow
      l, c = _targets(docs[doc], w_out, sen[i], k, prob, alias, state, rate, grad)
      for d in range(dim):
        docs[doc, d] += grad[d]
      loss, terms, examples = loss + l, terms + c, examples + 1
      continue
    b = 1 + _below(_next(state), window)
    lo, hi = max(0, i - b), min(n, i + b + 1)
    if model == 0:  # skip-gram: each window word's vector against the center (word2vec.c)
      for j in range(lo, hi):
        if j != i:
          l, c = _targets(w_in[sen[j]], w_out, sen[i], k, prob, alias, state, rate, grad)
          for d in range(dim):
            w_in[sen[j], d] += grad[d]
          loss, terms, examples = loss + l, terms + c, examples + 1
      continue
    count = 0
    h[:] = 0.0
    for j in range(lo, hi):
      if j != i:
        for d in range(dim):
          h[d] += w_in[sen[j], d]
        count += 1
    if model == 2:
      for d in range(dim):
        h[d] += docs[doc, d]
      count += 1
    if count == 0:
      continue
    for d in range(dim):
      h[d] /= count
    l, c = _targets(h, w_out, sen[i], k, prob, alias, state, rate, grad)
    for j in range(lo, hi):
      if j != i:
        for d in range(dim):
          w_in[sen[j], d] += grad[d]
    if model == 2:
      for d in range(dim):
        docs[doc, d] += grad[d]
    loss, terms, examples = loss + l, terms + c, examples + 1
  return loss, terms, examples


@numba.njit(**_JIT)
def train_chunk(model, tokens, row_splits, doc_ids, s0, s1, w_in, w_out, docs, keep, prob,
                alias, window, k, seed, rate0, progress0, progress_per_token, min_ratio):
  """Trains sentences s0..s1-1 in order; returns [loss sum, loss terms, examples, tokens kept].

  Args:
    model: a code of MODEL_CODES.
    tokens, row_splits: the corpus's token ids (int64) and sentence boundaries.
    doc_ids: each sentence's document (PV; else an empty array).
    w_in, w_out, docs: float32 weights, updated in place (docs: PV only).
    keep: each word's keep probability (float64; empty: keep every token).
    prob, alias: the noise words' alias table.
    window, k: max window (drawn uniform on 1..window) and noise words an example.
    seed: the chunk's 64-bit seed.
    rate0, min_ratio: the starting rate, and the least fraction of it.
    progress0, progress_per_token: the run's progress at token row_splits[s0],
      and its step per (unsubsampled) token.
  """
  state = np.empty(1, np.uint64)
  state[0] = np.uint64(seed)
  longest = 1
  for s in range(s0, s1):
    longest = max(longest, row_splits[s + 1] - row_splits[s])
  sen = np.empty(longest, np.int64)
  dim = w_out.shape[1]
  h = np.empty(dim, np.float32)
  grad = np.empty(dim, np.float32)
  result = np.zeros(4, np.float64)
  for s in range(s0, s1):
    t0, t1 = row_splits[s], row_splits[s + 1]
    progress = progress0 + (t0 - row_splits[s0]) * progress_per_token
    rate = rate0 * max(1.0 - progress, min_ratio)
    n = _kept(tokens, t0, t1, keep, state, sen)
    doc = doc_ids[s] if doc_ids.shape[0] else 0
    loss, terms, examples = _sentence(model, sen, n, doc, w_in, w_out, docs, prob, alias,
                                      window, k, state, rate, h, grad)
    result[0] += loss
    result[1] += terms
    result[2] += examples
    result[3] += n
  return result
