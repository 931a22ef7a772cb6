"""Masked-LM rules: one module per rule, each with all the forms it runs in.

A rule says which positions of an instance are masked: `single_piece`
(wordpieces, uniformly), `whole_word` (whole words in random order, the
reference's walk) and `ngram` (runs of 1..N whole words, weight 1/n). Each
rule's module holds the rule's forms side by side:
  * Python (`python_choice`): the reference's draws from a `random.Random`,
    for static records (and the reference-compatible walk);
  * numpy (`numpy_choice`): counter-based draws, for the TF-free readers of
    dynamic records (and, single pieces only, static records in arrays);
  * TensorFlow (`tf_choice`): the same numbers as numpy, inside tf.data
    (`make_dataset` of dynamic records). The forms take the `tf` module as
    an argument: nothing here imports TensorFlow.
and the invariant that ties them is tested per rule (tests/test_bert_mask_rules.py:
the numpy and TF forms choose the same positions bit for bit, and every
form un-masks back to the original tokens).

`draws` holds what every rule shares (the budget k, the shuffle, the
counter-based numbers and the 80/10/10 replacement, in each form);
`registry` maps flags and metadata to a rule. Adding a rule: a module here
and its entry in `registry`.
"""
