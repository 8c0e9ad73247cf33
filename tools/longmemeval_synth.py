#!/usr/bin/env python3
"""Writes a synthetic file in the official LongMemEval format, of the size of the S file by default, to measure
what `engram eval longmemeval` costs on a full run (ingest rate, search latency, peak memory) where the real
file is not at hand. Its text is Zipf-distributed pseudo-words, so its recall figures mean nothing.

Shape of the S file (Wu et al., ICLR 2025): 500 questions, about 115k tokens of haystack each, in about 50
sessions. Tokens are counted as 0.75 words each (a common rule of thumb for English and BPE tokenizers).

    python3 tools/longmemeval_synth.py --out /tmp/lme-synth.json [--questions 500] [--tokens 115000]
"""

import argparse
import json
import random

TYPES = [
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
]


def vocabulary(rng, size):
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in ["a", "e", "i", "o", "u", "ai", "ou"]]
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.choice([1, 2, 2, 3, 3, 4]))))
    return sorted(words)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--questions", type=int, default=500)
    ap.add_argument("--tokens", type=int, default=115_000, help="haystack tokens per question")
    ap.add_argument("--sessions", type=int, default=50, help="sessions per question")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    vocab = vocabulary(rng, 30_000)
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    cum = []
    total = 0.0
    for w in weights:
        total += w
        cum.append(total)
    words_per_session = int(args.tokens * 0.75 / args.sessions)
    with open(args.out, "w") as out:
        out.write("[")
        for q in range(args.questions):
            qtype = TYPES[q % len(TYPES)]
            key = rng.sample(vocab[5000:], 4)
            answers = sorted(rng.sample(range(args.sessions), 2 if qtype == "multi-session" else 1))
            ids, dates, sessions = [], [], []
            for s in range(args.sessions):
                sid = f"answer_{q:05x}_{s}" if s in answers else f"synth_{q}_{s}"
                turns = []
                left = words_per_session
                t = 0
                while left > 0:
                    n = min(left, rng.randint(20, 80) if t % 2 == 0 else rng.randint(150, 450))
                    text = rng.choices(vocab, cum_weights=cum, k=n)
                    has = s in answers and t == 2
                    if has:
                        text[: len(key)] = key
                    turns.append(
                        {"role": "user" if t % 2 == 0 else "assistant", "content": " ".join(text), "has_answer": has}
                    )
                    left -= n
                    t += 1
                ids.append(sid)
                dates.append(f"2023/{1 + s * 12 // args.sessions:02d}/{1 + s % 28:02d} (Mon) {9 + s % 12:02d}:{s % 60:02d}")
                sessions.append(turns)
            question = {
                "question_id": f"synth{q:05d}",
                "question_type": qtype,
                "question": " ".join(key + rng.choices(vocab[:200], k=4)),
                "answer": "synthetic",
                "question_date": "2023/12/31 (Sun) 12:00",
                "haystack_session_ids": ids,
                "haystack_dates": dates,
                "haystack_sessions": sessions,
                "answer_session_ids": [ids[a] for a in answers],
            }
            if q:
                out.write(",\n")
            json.dump(question, out)
        out.write("]\n")


if __name__ == "__main__":
    main()
