"""mt_data's pure pieces of work, shared by the local run and the Beam pipeline.

Both engines read pairs with `preprocess.parse_line`, count vocabularies in
first-occurrence order, encode blocks with `records.framed_block`, and build
the split sizes, length statistics and metadata here, so a Beam run writes the
same bytes as a local one.
"""

from typing import Dict, List, Sequence, Tuple

from textrecords.runs import cli
from textrecords.wire import features
from textrecords.datasets import metadata
from textrecords.files import storage
from textrecords.files import text_input
from textrecords.datasets import vocab as core_vocab
from textrecords.errors import UserError

from mt_data import preprocess
from mt_data import schema


def split_sizes_or_error(total: int, lines: int, skipped: dict, num_train: int, num_val: int,
                         files: Sequence[str]) -> Tuple[int, int]:
  """(n_train, n_val) of `total` valid pairs; a UserError when nothing can be written."""
  if not total:
    raise UserError(f"no valid pairs in {', '.join(files)}: {lines} lines read, "
                    f"skipped {skipped}; expected 'source<TAB>target' lines")
  n_train, n_val = preprocess.split_sizes(total, num_train, num_val)
  if n_train == 0:
    raise UserError(f"no train pairs: the input has {total} valid pairs and "
                    f"--num_val={num_val} reserves them all; lower --num_val")
  return n_train, n_val


def split_warnings(n_train: int, n_val: int, num_train: int, num_val: int) -> List[str]:
  out = []
  if num_train > 0 and n_train < num_train:
    out.append(f"warning: only {n_train} valid pairs for --num_train={num_train}")
  if num_val > 0 and n_val < num_val:
    out.append(f"warning: {n_val} validation pairs, fewer than --num_val={num_val}")
  return out


def record_paths(lay, num_shards: int) -> Dict[str, List[str]]:
  """Split -> its record files (shards in name order) in a DatasetLayout."""
  return {split: lay.record_paths(split, num_shards) for split in schema.SPLITS}


def length_stats(count: int, total: int, longest: int) -> dict:
  """A split side's {max_len, mean_len} (tokens with <eos>)."""
  if not count:
    return {"max_len": 0, "mean_len": 0.0}
  return {"max_len": longest, "mean_len": round(total / count, 4)}


def split_length_stats(src_lens, tgt_lens, n_train: int) -> dict:
  """Split -> side -> `length_stats`, from per-pair token counts (numpy arrays,
  train pairs first)."""
  def stats(lens):
    return length_stats(len(lens), int(lens.sum()), int(lens.max()) if len(lens) else 0)
  return {split: {"source": stats(src_lens[part]), "target": stats(tgt_lens[part])}
          for split, part in (("train", slice(None, n_train)),
                              ("valid", slice(n_train, None)))}


def vocab_files(tokenizer: str, src_tokens: List[str], tgt_tokens: List[str],
                tokenizer_json: Dict[str, bytes] = None) -> Dict[str, bytes]:
  """File name -> bytes of the vocabularies (and BPE tokenizer models)."""
  files = dict(tokenizer_json or {})
  files[schema.VOCAB_FILE["source"]] = core_vocab.tokens_file_bytes(src_tokens)
  files[schema.VOCAB_FILE["target"]] = core_vocab.tokens_file_bytes(tgt_tokens)
  return files


def inputs_info(files: Sequence[str]) -> List[dict]:
  """The metadata's record of the inputs: path (as given), bytes, sha256."""
  return [{"path": f, "bytes": storage.size(f), "sha256": storage.sha256(f)} for f in files]


def build_meta(cfg, inputs: List[dict], lines_read: int, skipped: dict,
               decode_errors: text_input.DecodeErrorCounts, n_train: int,
               n_val: int, split_names: Dict[str, List[str]], split_stats: dict,
               src_size: int, tgt_size: int, files: Dict[str, bytes], unk: dict,
               infos: List[dict]) -> dict:
  """The metadata, files (with their roles) and splits included."""
  meta = metadata.base_meta(schema.PACKAGE)
  meta.update({
      "schema": features.schema_to_json(schema.SCHEMA),
      "tokenizer": cfg.tokenizer,
      "reserved_tokens": list(preprocess.RESERVED),
      "flags": cfg.output_flags(),
      "inputs": inputs,
      # As in every package: counts; "invalid_lines" are the lines that are
      # no translation pair (per reason), "skipped_lines" those skipped as
      # invalid UTF-8 (--on_decode_error=skip_line).
      "counts": {"lines_read": lines_read, "invalid_lines": dict(skipped),
                 "pairs": n_train + n_val, **decode_errors.as_dict()},
      "compression": cfg.compression_name,
      "splits": {
          split: {"pairs": n, "files": split_names[split], **split_stats[split]}
          for split, n in (("train", n_train), ("valid", n_val))},
      "vocab": {
          side: {"file": schema.VOCAB_FILE[side], "size": size,
                 "sha256": core_vocab.sha256_bytes(files[schema.VOCAB_FILE[side]])}
          for side, size in (("source", src_size), ("target", tgt_size))},
      "unk_tokens": unk,
  })
  if cfg.tokenizer == "bpe":
    for side in ("source", "target"):
      meta["vocab"][side]["tokenizer_file"] = schema.TOKENIZER_FILE[side]
  roles = {n: metadata.ROLE_VOCAB for n in schema.VOCAB_FILE.values()}
  roles.update({n: metadata.ROLE_TOKENIZER for n in schema.TOKENIZER_FILE.values()})
  return metadata.set_files(meta, infos, split_names, roles)


def summary_of(meta: dict, out: str) -> dict:
  """A run's summary from its metadata (both engines; the caller adds timings)."""
  return cli.summary(schema.PACKAGE, [out], meta["counts"], meta["files"],
                     **{k: meta[k] for k in ("splits", "vocab", "tokenizer")})
