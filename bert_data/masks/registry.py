"""The masking rules by name, and which one a run's flags or a dataset's metadata ask for.

Config validation (`validate`), the metadata's "masking" block
(`meta_fields`, `rule_of_meta`), `make_dataset` and the TF-free readers
(through `dynamic_masking`), the create-time masking (`masking`) and the
compiled reference walk (`reference_walk`) all find their rule here.

>>> rule_for(True, 3).NAME, rule_for(True, 1).NAME, rule_for(False, 1).NAME
('ngram', 'whole_word', 'single_piece')
"""

from bert_data.masks import ngram
from bert_data.masks import single_piece
from bert_data.masks import whole_word

RULES = {rule.NAME: rule for rule in (single_piece, whole_word, ngram)}


def rule_for(whole_word_mask: bool, max_ngram_size: int):
  """The rule module of the flags --do_whole_word_mask and --max_ngram_size."""
  if not whole_word_mask:
    return single_piece
  return ngram if max_ngram_size > 1 else whole_word


def validate(config) -> None:
  """Each rule checks its flags in a `BertConfig` (raises UserError)."""
  for rule in RULES.values():
    rule.validate(config)


def meta_fields(config) -> dict:
  """The rule's entries of the metadata's "masking" block."""
  return {"whole_word": config.do_whole_word_mask, "max_ngram_size": config.max_ngram_size}


def rule_of_meta(masking: dict):
  """The rule of a metadata "masking" block (`meta_fields`)."""
  return rule_for(bool(masking["whole_word"]), int(masking.get("max_ngram_size", 1)))
