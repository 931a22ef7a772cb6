#!/usr/bin/env python3
"""Writes mt_data/sample/mt_sample.txt: English-French pairs made from word lists written here.

No third-party text: every pair is composed from the subjects, verbs,
adjectives and nouns below (French agreement, elision and negation applied),
so the sample can be bundled under the repository's terms. A few short fixed
phrases come first (among them the sentences train_seq2seq.py translates by
default); then the generated pairs ordered by the sha256 of their English
side, the first SIZE taken: the same file on any machine and Python version.

  python scripts/dev/make_mt_sample.py            # rewrites the bundled sample
  python scripts/dev/make_mt_sample.py --check    # exit 1 if the bundled file differs
"""

import hashlib
import os
import sys
from typing import Iterator, List, Tuple
from textrecords.runs import script_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "mt_data", "sample", "mt_sample.txt")
SIZE = 640  # mt_data.create's defaults take 512 train + 128 validation pairs

FIXED = (("Go.", "Va !"), ("I lost.", "J'ai perdu."), ("He's calm.", "Il est calme."),
         ("I'm home.", "Je suis chez moi."), ("We won.", "Nous avons gagné."),
         ("Come here.", "Viens ici !"), ("Listen.", "Écoute !"), ("Look.", "Regarde !"),
         ("Wait here.", "Attends ici !"), ("Be careful.", "Sois prudent !"),
         ("Go now.", "Va maintenant !"), ("It's me.", "C'est moi."))

# English subject, "be" (contracted), French subject, "être", "avoir", agreement
# (0: masculine singular, 1: feminine singular, 2: masculine plural), "chez" pronoun.
SUBJECTS = (("I", "I'm", "je", "suis", "ai", 0, "moi"),
            ("You", "You're", "tu", "es", "as", 0, "toi"),
            ("He", "He's", "il", "est", "a", 0, "lui"),
            ("She", "She's", "elle", "est", "a", 1, "elle"),
            ("We", "We're", "nous", "sommes", "avons", 2, "nous"),
            ("They", "They're", "ils", "sont", "ont", 2, "eux"))
THIRD_PERSON = ("He", "She")

# English adjective: French masculine, feminine, masculine plural.
ADJECTIVES = (("tired", "fatigué", "fatiguée", "fatigués"),
              ("happy", "heureux", "heureuse", "heureux"),
              ("calm", "calme", "calme", "calmes"), ("ready", "prêt", "prête", "prêts"),
              ("sick", "malade", "malade", "malades"), ("busy", "occupé", "occupée", "occupés"),
              ("sad", "triste", "triste", "tristes"), ("late", "en retard", "en retard",
                                                       "en retard"),
              ("strong", "fort", "forte", "forts"), ("rich", "riche", "riche", "riches"),
              ("young", "jeune", "jeune", "jeunes"), ("lost", "perdu", "perdue", "perdus"),
              ("free", "libre", "libre", "libres"), ("angry", "fâché", "fâchée", "fâchés"),
              ("careful", "prudent", "prudente", "prudents"),
              ("shy", "timide", "timide", "timides"),
              ("quiet", "silencieux", "silencieuse", "silencieux"))

# Nouns: English, French, feminine? (none starts with a vowel: no elision of le/la).
# MASS nouns take no "a".
NOUNS = {
    "food": (("apple", "pomme", True), ("bread", "pain", False), ("cake", "gâteau", False),
             ("soup", "soupe", True), ("fish", "poisson", False),
             ("cheese", "fromage", False), ("pear", "poire", True)),
    "reading": (("book", "livre", False), ("letter", "lettre", True),
                ("newspaper", "journal", False), ("map", "carte", True)),
    "things": (("car", "voiture", True), ("bike", "vélo", False), ("key", "clé", True),
               ("bag", "sac", False), ("hat", "chapeau", False), ("watch", "montre", True),
               ("ticket", "billet", False), ("phone", "téléphone", False),
               ("cup", "tasse", True), ("chair", "chaise", True), ("box", "boîte", True)),
    "animals": (("cat", "chat", False), ("dog", "chien", False), ("horse", "cheval", False)),
}

# Verbs: English base, 3rd person, past; French present (je, tu, il, elle, nous, ils),
# past participle; the noun groups they take.
VERBS = (
    ("see", "sees", "saw", ("vois", "vois", "voit", "voit", "voyons", "voient"), "vu",
     ("things", "animals")),
    ("like", "likes", "liked", ("aime", "aimes", "aime", "aime", "aimons", "aiment"), "aimé",
     ("food", "reading", "things", "animals")),
    ("want", "wants", "wanted", ("veux", "veux", "veut", "veut", "voulons", "veulent"),
     "voulu", ("food", "reading", "things", "animals")),
    ("have", "has", "had", ("ai", "as", "a", "a", "avons", "ont"), "eu",
     ("things", "animals", "reading")),
    ("eat", "eats", "ate", ("mange", "manges", "mange", "mange", "mangeons", "mangent"),
     "mangé", ("food",)),
    ("read", "reads", "read", ("lis", "lis", "lit", "lit", "lisons", "lisent"), "lu",
     ("reading",)),
    ("buy", "buys", "bought", ("achète", "achètes", "achète", "achète", "achetons",
                               "achètent"), "acheté", ("food", "reading", "things")),
    ("find", "finds", "found", ("trouve", "trouves", "trouve", "trouve", "trouvons",
                                "trouvent"), "trouvé", ("things", "animals", "reading")),
    ("take", "takes", "took", ("prends", "prends", "prend", "prend", "prenons", "prennent"),
     "pris", ("things", "food")),
    ("sell", "sells", "sold", ("vends", "vends", "vend", "vend", "vendons", "vendent"),
     "vendu", ("things", "reading")),
    ("lose", "loses", "lost", ("perds", "perds", "perd", "perd", "perdons", "perdent"),
     "perdu", ("things",)),
)

# English determiner: French masculine, feminine, after a negation (None: unchanged).
DETERMINERS = (("the", "le", "la", None), ("a", "un", "une", "de"), ("my", "mon", "ma", None))

MASS = ("bread", "soup", "fish", "cheese")
VOWELS = tuple("aeiouéèêàâîôh")
BE_PAIRS = 160  # of SIZE; the rest are verb pairs


def elide(first: str, word: str) -> str:
  """`first word`, with je/ne/de elided before a vowel (j'aime, n'ai, d'eau)."""
  if first in ("je", "ne", "de") and word.startswith(VOWELS):
    return f"{first[0]}'{word}"
  return f"{first} {word}"


def sentence(text: str, end: str = ".") -> str:
  """Capitalised, with the end mark."""
  return text[0].upper() + text[1:] + end


def be_pairs() -> Iterator[Tuple[str, str]]:
  """`I'm tired.` / `Je suis fatigué.`, negated too; `I'm home.` / `Je suis chez moi.`."""
  for _, be, fr, etre, _, agree, chez in SUBJECTS:
    words = [(adj, forms[agree]) for adj, *forms in ADJECTIVES] + [("home", f"chez {chez}")]
    for adj_en, adj_fr in words:
      yield sentence(f"{be} {adj_en}"), sentence(f"{fr} {etre} {adj_fr}")
      yield (sentence(f"{be} not {adj_en}"),
             sentence(f"{elide(fr, elide('ne', etre))} pas {adj_fr}"))


def verb_pairs() -> Iterator[Tuple[str, str]]:
  """Present and past, affirmative and negative, of each verb with each of its nouns."""
  for person, (en, _, fr, _, avoir, _, _) in enumerate(SUBJECTS):
    third = en in THIRD_PERSON
    for base, third_form, past, present, participle, groups in VERBS:
      for noun_en, noun_fr, feminine in (n for g in groups for n in NOUNS[g]):
        for det_en, masc, fem, negated in DETERMINERS:
          if det_en == "a" and noun_en in MASS:
            continue
          det = fem if feminine else masc
          det_en = "an" if det_en == "a" and noun_en[0] in "aeiou" else det_en
          obj_en, obj_fr = f"{det_en} {noun_en}", f"{det} {noun_fr}"
          neg_obj = f"{negated} {noun_fr}" if negated else obj_fr
          verb = present[person]
          yield (sentence(f"{en} {third_form if third else base} {obj_en}"),
                 sentence(f"{elide(fr, verb)} {obj_fr}"))
          yield (sentence(f"{en} {'doesn' if third else 'don'}'t {base} {obj_en}"),
                 sentence(f"{elide(fr, elide('ne', verb))} pas {neg_obj}"))
          yield (sentence(f"{en} {past} {obj_en}"),
                 sentence(f"{elide(fr, avoir)} {participle} {obj_fr}"))
          yield (sentence(f"{en} didn't {base} {obj_en}"),
                 sentence(f"{elide(fr, elide('ne', avoir))} pas {participle} {neg_obj}"))


def _by_hash(made) -> List[Tuple[str, str]]:
  """Pairs ordered by the sha256 of their English side, FIXED's left out."""
  fixed_en = {en for en, _ in FIXED}
  pairs_by_en = {en: fr for en, fr in made if en not in fixed_en}
  order = sorted(pairs_by_en, key=lambda en: hashlib.sha256(en.encode("utf-8")).hexdigest())
  return [(en, pairs_by_en[en]) for en in order]


def pairs(size: int = SIZE) -> List[Tuple[str, str]]:
  """FIXED, then BE_PAIRS "be" pairs and verb pairs mixed by the sha256 of their
  English side: `size` in all."""
  chosen = (_by_hash(be_pairs())[:BE_PAIRS]
            + _by_hash(verb_pairs())[:size - len(FIXED) - BE_PAIRS])
  return list(FIXED) + _by_hash(chosen)


def text(size: int = SIZE) -> str:
  """The sample file's content: `English<TAB>French` lines."""
  return "".join(f"{en}\t{fr}\n" for en, fr in pairs(size))


def main(argv=None) -> int:
  p = script_args.ScriptParser(description=__doc__.split("\n")[0])
  p.add_argument("--check", action="store_true", help="compare with the bundled file only")
  args = p.parse_args(argv)
  want = text()
  if args.check:
    with open(SAMPLE, encoding="utf-8") as f:
      same = f.read() == want
    print(f"{SAMPLE}: {'up to date' if same else 'differs from make_mt_sample.py'}")
    return 0 if same else 1
  tmp = f"{SAMPLE}.tmp-{os.getpid()}"
  with open(tmp, "w", encoding="utf-8", newline="\n") as f:
    f.write(want)
  os.replace(tmp, SAMPLE)
  print(f"wrote {len(want.splitlines())} pairs to {SAMPLE}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
