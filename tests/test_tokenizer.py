"""The fast WordPieceTokenizer must equal the plain-Python reference oracle."""

import os
import pickle
import subprocess
import sys
import threading
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import pre_tokenizers

import reference_tokenizer as ref
from bert_data import tokenizer as tokenizer_module
from bert_data.tokenizer import WordPieceTokenizer

TESTDATA = os.path.join(os.path.dirname(__file__), "testdata")
VOCAB = os.path.join(TESTDATA, "vocab_uncased.txt")
SAMPLE_TEXT = os.path.join(TESTDATA, "bert_sample_text.txt")

EDGE_CASES = [
    "",
    " ",
    "\t\n\r ",
    "\xa0",
    "\u3000",
    "\xa0hello\u3000world\xa0",
    "Hello, World!",
    "[CLS] [SEP] [MASK] [UNK] [PAD]",
    "Héllo wörld naïve café résumé Ångström",
    "ÀÉÎÕÜ àéîõü ß Æ œ ø ł đ",
    "e\u0301 a\u0300\u0316 \u0301",
    "İstanbul İİ i\u0307",
    "ΟΔΟΣ",
    "ΟΔΟΣ.",
    "ΟΔΟΣ,ΣΑΣ",
    "ΣΑΣ",
    "Σ",
    "AΣB",
    "AΣ",
    "ΣA",
    "'ΟΔΟΣ'",
    "ΑΣ\u0301 ΑΣ\u00ad ΑΣ-Β ΑΣ\u200dΒ",
    "Ὀδυσσεύς ΟΔΥΣΣΕΥΣ",
    "中文字符 日本語のテキスト 한국어 텍스트",
    "力加勝北区ᴵᴺᵀᵃছজটডণত",
    "\U00020000\U0002a6df\U0002b820\U0002b91f\U0002b920\U0002ceaf",
    "a\x00b\ufffdc\x7fd\x85e\x1cf\x0bg\x0ch",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060wj\u00adshy",
    "line\u2028sep\u2029para",
    "\u180e\u2000\u200a\u202f\u205f\u1680",
    "¿Qué? ¡Sí! «quotes» „low” ‹single› —dash– …",
    "a\u061db a\u2e43b a\u2e5db a\u166db \U000111c9",
    "price: $5, 50% off & more #hash @at ~tilde `tick` ^caret |pipe|",
    "smile 😀 family 👨\u200d👩\u200d👧 flag 🇫🇷 keycap 1\ufe0f\u20e3",
    "mixed Latin Кириллица Ελληνικά العربية עברית हिन्दी ไทย",
    "\u0378unassigned\U000e0080\U0010ffff",
    "a\ud800b\udfffc",
    "private\ue000use\U000f0000",
    "fullwidth ＡＢＣ １２３ ！？",
    "ligatures ﬁ ﬂ ﬀ and ℌ ℍ ℵ ™ ①",
    "a" * 150,
    "a" * 200,
    "a" * 201,
    "b" * 201 + " ok",
    "ab" * 100 + "," + "c" * 201,
]


@pytest.fixture(scope="module", params=[(True, "python"), (False, "python"), (True, "hf"),
                                        (False, "hf")],
                ids=["uncased", "cased", "uncased-hf", "cased-hf"])
def pair(request):
  """(fast tokenizer, oracle) for one case mode."""
  lower, basic_pass = request.param
  return (WordPieceTokenizer(VOCAB, do_lower_case=lower, basic_pass=basic_pass),
          ref.ReferenceTokenizer(VOCAB, do_lower_case=lower))


@pytest.fixture(scope="module")
def uncased():
  return WordPieceTokenizer(VOCAB)


def assert_matches(tok, oracle, text):
  tokens = oracle.tokenize(text)
  assert tok.tokenize(text) == tokens, repr(text)
  assert tok.encode(text) == oracle.encode(text), repr(text)


# ---------------------------------------------------------------- oracle equality

@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_match_oracle(pair, text):
  assert_matches(*pair, text)


def test_edge_cases_batched_match_oracle(pair):
  tok, oracle = pair
  assert tok.encode_batch(EDGE_CASES) == [oracle.encode(t) for t in EDGE_CASES]


def test_sample_corpus_lines_match_oracle(pair):
  tok, oracle = pair
  with open(SAMPLE_TEXT, encoding="utf-8") as handle:
    lines = handle.read().split("\n")
  assert len(lines) > 30
  for line in lines:
    assert_matches(tok, oracle, line)
  assert tok.encode_batch(lines) == [oracle.encode(line) for line in lines]


def test_word_cache_is_bounded_and_exact(monkeypatch):
  """A full word cache is emptied and refilled: it never holds more than
  its bound, and the ids stay the oracle's."""
  monkeypatch.setattr(WordPieceTokenizer, "_MAX_CACHED_WORDS", 8)
  tok, oracle = WordPieceTokenizer(VOCAB), ref.ReferenceTokenizer(VOCAB, do_lower_case=True)
  with open(SAMPLE_TEXT, encoding="utf-8") as handle:
    lines = handle.read().split("\n")
  sizes = []
  for line in lines:
    assert tok.encode_batch([line]) == [oracle.encode(line)]
    sizes.append(len(tok._word_ids))  # pylint: disable=protected-access
  assert max(sizes) == 8 and min(sizes[len(sizes) // 2:]) < 8  # filled, emptied, refilled


@pytest.mark.parametrize("text,expected", [
    ("ΟΔΟΣ", ["ο", "##δ", "##ος"]),
    ("ΟΔΟΣ.", ["ο", "##δ", "##ος", "."]),
    ("ΣΑΣ", ["σ", "##α", "##ς"]),
    ("Σ", ["σ"]),
    ("AΣB", ["a", "##σ", "##b"]),
])
def test_greek_final_sigma(uncased, text, expected):
  assert uncased.tokenize(text) == expected


def test_literal_special_tokens_are_plain_text(uncased):
  assert uncased.tokenize("[CLS] x [SEP]") == ["[", "cl", "##s", "]", "x", "[", "sep", "]"]
  assert uncased.encode("") == []


def test_word_length_limit_is_200(uncased):
  assert uncased.tokenize("a" * 201) == ["[UNK]"]
  assert "[UNK]" not in uncased.tokenize("a" * 200)
  assert "[UNK]" not in uncased.tokenize("a" * 150)
  assert uncased.tokenize("a" * 201 + " hello") == ["[UNK]", "hello"]


def test_cased_mode_keeps_case_and_accents():
  tok = WordPieceTokenizer(VOCAB, do_lower_case=False)
  oracle = ref.ReferenceTokenizer(VOCAB, do_lower_case=False)
  for text in ("Hello WORLD", "café Ångström", "ΟΔΟΣ.", "İ"):
    assert_matches(tok, oracle, text)
  assert tok.tokenize("Hello") == ["[UNK]"]  # the uncased vocab has no "Hello"


# ---------------------------------------------------------------- every code point

# Large blocks of interchangeable letters: CJK ideographs (apart from
# U+2B700..U+2BA00, where Hugging Face's CJK range deviates), Hangul syllables
# and Tangut. They, and unassigned code points, are checked at a stride.
_UNIFORM_BLOCKS = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
                   (0x17000, 0x18AFF), (0x20000, 0x2B6FF), (0x2BA01, 0x2CEAF),
                   (0x30000, 0x3134A))
_STRIDE = 193


def _in_uniform_block(code):
  return any(low <= code <= high for low, high in _UNIFORM_BLOCKS)


def _code_points_to_check():
  """Every assigned, non-private code point; uniform ones at a stride."""
  codes = []
  for code in range(0x110000):
    category = unicodedata.category(chr(code))
    if category in ("Co", "Cs"):
      continue
    if code % _STRIDE and (category == "Cn" or _in_uniform_block(code)):
      continue
    codes.append(code)
  return codes


@pytest.fixture(scope="module")
def char_vocab_file(tmp_path_factory):
  """A vocab of every code point alone and as '##' continuation.

  With it, WordPiece spells out each basic token character by character, so
  any difference in the basic pass shows up in the word pieces.
  """
  chars = [chr(code) for code in range(0x110000)
           if unicodedata.category(chr(code)) not in ("Cn", "Cs", "Co")]
  chars = [char for char in chars if char.strip() == char and char not in "\n\r"]
  path = tmp_path_factory.mktemp("vocab") / "chars.txt"
  path.write_text("\n".join(["[UNK]"] + chars + ["##" + c for c in chars]) + "\n",
                  encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def code_point_lines():
  """One line per checked code point, holding it in a few contexts."""
  return [f"a{chr(c)}b A{chr(c)} {chr(c)}\u0301" for c in _code_points_to_check()]


@pytest.mark.parametrize("basic_pass", ["python", "hf"])
@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_every_code_point_matches_oracle(char_vocab_file, code_point_lines, do_lower_case,
                                         basic_pass):
  tok = WordPieceTokenizer(char_vocab_file, do_lower_case=do_lower_case, basic_pass=basic_pass)
  oracle = ref.ReferenceTokenizer(char_vocab_file, do_lower_case=do_lower_case)
  lines = code_point_lines
  if basic_pass == "hf":
    selector = tok._selector  # pylint: disable=protected-access
    fast_lines = sum(not selector.needs_python_path(line) for line in lines)
    assert fast_lines > len(lines) // 2  # most lines exercise the Hugging Face path
  got = tok.encode_batch(lines)
  mismatches = [line for line, ids in zip(lines, got) if ids != oracle.encode(line)]
  assert not mismatches[:20]


@pytest.mark.parametrize("char", ["Σ", "\u2028", "\u2029", "\u00ad", "\u0345", "\u0130"])
def test_context_sensitive_characters(pair, char):
  tok, oracle = pair
  for text in (f"A{char}", f"A{char}B", f"{char}A", f"ΑΣ{char}", f"ΑΣ{char}Β",
               f"Α{char}Σ", f"Α{char}Σ.", f"{char}{char}"):
    assert_matches(tok, oracle, text)


def test_hugging_face_whitespace_is_python_whitespace():
  """Words of the Python basic pass come back intact from WhitespaceSplit."""
  chars = [chr(c) for c in range(0x110000)
           if not 0xD800 <= c <= 0xDFFF and not chr(c).isspace()]
  text = "a" + "".join(chars) + "b"
  pieces = pre_tokenizers.WhitespaceSplit().pre_tokenize_str(text)
  assert [piece for piece, _ in pieces] == [text]


# ---------------------------------------------------------------- properties

_TRICKY = ("Σ", "σ", "ς", "İ", "I", "i", "\u0307", "\u0301", "\u0345", "A", "a", " ",
           "\xa0", "\u3000", "\u2028", "\t", "\n", "\r", "\x00", "\x85", "\ufffd",
           "\u200b", "\u200d", "\u00ad", "\ufeff", ".", ",", "'", "-", "¿", "«",
           "中", "\U0002b820", "\U0002b920", "\u0378", "\U000e0001", "\ud800",
           "😀", "\u2e5d", "\u166d", "\U000111c9", "é", "Å", "\u1fef", "\u037e")

_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(max_codepoint=0x2FFF), max_size=40),
    st.text(alphabet=st.sampled_from(_TRICKY), max_size=30),
    st.lists(st.one_of(st.sampled_from(_TRICKY), st.text(max_size=3)),
             max_size=20).map("".join),
)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXT)
def test_arbitrary_text_matches_oracle(pair, text):
  tok, oracle = pair
  tokens = tok.tokenize(text)
  assert tokens == oracle.tokenize(text)
  ids = tok.encode(text)
  assert ids == [tok.token_to_id(t) for t in tokens]
  assert ids == oracle.encode(text)


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_TEXT, max_size=12))
def test_encode_batch_equals_encode(uncased, texts):
  assert uncased.encode_batch(texts) == [uncased.encode(t) for t in texts]


def test_encode_batch_keeps_order_across_paths(uncased):
  texts = ["plain ascii", "ΟΔΟΣ", "", "café", "a\ud800b", "中文", "\u0378"] * 5
  assert uncased.encode_batch(texts) == [uncased.encode(t) for t in texts]
  assert uncased.encode_batch([]) == []
  assert uncased.encode_batch(t for t in ["x", "ΣΣ"]) == [uncased.encode("x"),
                                                        uncased.encode("ΣΣ")]


def test_rejects_non_text(uncased):
  with pytest.raises(TypeError):
    uncased.encode(b"bytes")


# ---------------------------------------------------------------- vocab

def _write_vocab(tmp_path, data: bytes, name="vocab.txt"):
  path = tmp_path / name
  path.write_bytes(data)
  return str(path)


def test_vocab_api(uncased):
  oracle_vocab = ref.load_vocab(VOCAB)
  assert uncased.vocab_size == 30522
  assert uncased.vocab_words() == list(oracle_vocab)
  assert uncased.token_to_id("[UNK]") == oracle_vocab["[UNK]"]
  assert uncased.token_to_id("no-such-token") is None
  assert uncased.id_to_token(uncased.token_to_id("hello")) == "hello"
  with pytest.raises(IndexError):
    uncased.id_to_token(30522)
  with pytest.raises(IndexError):
    uncased.id_to_token(-1)


def test_duplicate_tokens_take_last_line(tmp_path):
  path = _write_vocab(tmp_path, b"[UNK]\nab\n##c\nab\r\n \nx \n##c\nlast")
  tok = WordPieceTokenizer(path)
  oracle_vocab = ref.load_vocab(path)
  assert oracle_vocab == {"[UNK]": 0, "ab": 3, "##c": 6, "": 4, "x": 5, "last": 7}
  assert tok.vocab_size == 8
  assert tok.vocab_words() == ["[UNK]", "ab", "##c", "", "x", "last"]
  assert [tok.token_to_id(w) for w in tok.vocab_words()] == list(oracle_vocab.values())
  assert tok.id_to_token(1) == "ab"
  assert tok.encode("abc ab x last") == [3, 6, 3, 5, 7]
  assert tok.tokenize("abc") == ["ab", "##c"]


def test_vocab_carriage_returns_are_dropped(tmp_path):
  path = _write_vocab(tmp_path, b"[UNK]\r\nfo\ro\r\n")
  tok = WordPieceTokenizer(path)
  assert tok.vocab_words() == ["[UNK]", "foo"] == list(ref.load_vocab(path))
  assert tok.tokenize("foo") == ["foo"]


def test_missing_vocab_file(tmp_path):
  path = str(tmp_path / "absent.txt")
  with pytest.raises(FileNotFoundError, match="absent.txt"):
    WordPieceTokenizer(path)


@pytest.mark.parametrize("data,message", [
    (b"[UNK]\n\xff\xfe\n", "not valid UTF-8"),
    (b"", "empty"),
    (b"a\nb\n", r"lacks \[UNK\], \[CLS\], \[SEP\], \[MASK\]$"),
])
def test_bad_vocab_files(tmp_path, data, message):
  path = _write_vocab(tmp_path, data, "bad_vocab.txt")
  with pytest.raises(ValueError, match=message) as info:
    WordPieceTokenizer(path)
  assert "bad_vocab.txt" in str(info.value)


def test_unreadable_vocab_path_is_value_error(tmp_path):
  with pytest.raises(ValueError, match=str(tmp_path.name)):
    WordPieceTokenizer(str(tmp_path))


# ---------------------------------------------------------------- process / threads

def test_pickle_round_trip(tmp_path):
  with open(VOCAB, "rb") as handle:
    path = _write_vocab(tmp_path, handle.read())
  tok = WordPieceTokenizer(path, do_lower_case=True)
  clone = pickle.loads(pickle.dumps(tok))
  os.remove(path)  # the pickle carries the vocab itself
  assert clone.vocab_size == tok.vocab_size
  assert clone.do_lower_case is True
  assert clone.vocab_words() == tok.vocab_words()
  assert clone.encode_batch(EDGE_CASES) == tok.encode_batch(EDGE_CASES)


def test_thread_safety(uncased):
  texts = EDGE_CASES * 20
  expected = [uncased.encode(t) for t in texts]
  results = {}

  def work(key):
    results[key] = (uncased.encode_batch(texts), [uncased.tokenize(t) for t in texts])

  threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  for ids, tokens in results.values():
    assert ids == expected
    assert [[uncased.token_to_id(t) for t in ts] for ts in tokens] == expected


def test_unverified_environment_falls_back_to_python(monkeypatch):
  monkeypatch.setattr(tokenizer_module, "_VERIFIED_UNIDATA_VERSION", "0.0.0")
  with pytest.warns(RuntimeWarning, match="Python basic pass"):
    tok = WordPieceTokenizer(VOCAB, basic_pass="hf")
  oracle = ref.ReferenceTokenizer(VOCAB)
  assert tok._selector.needs_python_path("café")  # pylint: disable=protected-access
  assert not tok._selector.needs_python_path("cafe")  # pylint: disable=protected-access
  assert tok.encode_batch(EDGE_CASES) == [oracle.encode(t) for t in EDGE_CASES]


def test_does_not_import_tensorflow():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  code = ("import sys, bert_data.tokenizer as t; "
          "t.WordPieceTokenizer(sys.argv[1]).encode('x'); "
          "assert not any(m.startswith('tensorflow') for m in sys.modules)")
  subprocess.run([sys.executable, "-c", code, VOCAB], cwd=root, check=True)
