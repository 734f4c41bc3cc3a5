"""The input and outputs of benchmarks/batch_wordcount.py: the deterministic
(seeded) text file it generates, with the true count of every word
(generate_input), and the parsing of a variant's `word: count` output files
(parse_counts)."""

import collections
import glob
import os
import random


# -- input ------------------------------------------------------------------


def _vocabulary(rng, size):
    """`size` distinct lowercase words of 2-10 letters."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words, seen = [], set()
    while len(words) < size:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(2, 10)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def generate_input(path, lines, words_per_line, vocabulary_size, seed):
    """Writes `lines` lines of 1..2*words_per_line-1 words (mean words_per_line),
    words drawn Zipf-like (weight 1/rank) from a fixed vocabulary. Returns the
    true Counter of words."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, vocabulary_size)
    cum, total = [], 0.0
    for rank in range(1, len(vocab) + 1):
        total += 1.0 / rank
        cum.append(total)
    counts = collections.Counter()
    chunk = 10000
    with open(path, "w") as f:
        for start in range(0, lines, chunk):
            n = min(chunk, lines - start)
            lengths = [rng.randint(1, 2 * words_per_line - 1) for _ in range(n)]
            words = rng.choices(vocab, cum_weights=cum, k=sum(lengths))
            counts.update(words)
            out, pos = [], 0
            for length in lengths:
                out.append(" ".join(words[pos : pos + length]))
                pos += length
            f.write("\n".join(out))
            f.write("\n")
    return counts


def parse_counts(pattern):
    """Parses `word: count` lines of all files matching pattern."""
    counts = {}
    paths = [
        p for p in sorted(glob.glob(pattern)) if os.path.isfile(p) and not os.path.basename(p).startswith((".", "_"))
    ]
    for path in paths:
        with open(path) as f:
            for line in f:
                word, sep, count = line.rstrip("\n").rpartition(": ")
                if not sep:
                    raise ValueError("%s: malformed line %r" % (path, line))
                if word in counts:
                    raise ValueError("%s: word %r written twice" % (path, word))
                counts[word] = int(count)
    return counts, len(paths)
