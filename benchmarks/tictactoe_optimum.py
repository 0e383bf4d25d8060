"""Exact optimum for tic-tac-toe against a uniformly random opponent (issue 17 reference).

The learner plays one side, the opponent picks a uniformly random legal cell. The game tree is
small (< 6000 positions), so an exact search gives the best achievable outcome distribution:
at the learner's nodes we take the best child, at the opponent's nodes the average over its
legal moves (expectimax). "Best" depends on the objective, so three are reported:

- ``score``: maximize E[win - loss] (the reward of PettingZoo's tictactoe_v3: +1 / 0 / -1),
- ``win``:   maximize P(win) (ties broken by lower P(loss)),
- ``safe``:  minimize P(loss) (ties broken by higher P(win)).

For each, the result is the exact (P(win), P(draw), P(loss)) triple as fractions and percents.

Run: ``python benchmarks/tictactoe_optimum.py`` (no dependencies beyond the standard library).
"""

from __future__ import annotations

import argparse
import functools
from fractions import Fraction

LINES = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
)

Outcome = tuple[Fraction, Fraction, Fraction]  # P(win), P(draw), P(loss) for the learner


def winner(board: str) -> str | None:
    """Return 'X' or 'O' if that mark has three in a row, else None."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


def _key(objective: str, o: Outcome) -> tuple[Fraction, ...]:
    win, _draw, loss = o
    if objective == "score":
        return (win - loss, win)
    if objective == "win":
        return (win, -loss)
    if objective == "safe":
        return (-loss, win)
    raise ValueError(f"objective must be one of score/win/safe, got {objective!r}")


def solve(learner_mark: str, objective: str) -> Outcome:
    """Exact outcome distribution of the best learner policy; X always moves first."""

    @functools.cache
    def value(board: str) -> Outcome:
        w = winner(board)
        if w is not None:
            return (
                (Fraction(1), Fraction(0), Fraction(0))
                if w == learner_mark
                else (Fraction(0), Fraction(0), Fraction(1))
            )
        free = [i for i, c in enumerate(board) if c == "."]
        if not free:
            return (Fraction(0), Fraction(1), Fraction(0))
        to_move = "X" if board.count("X") == board.count("O") else "O"
        children = [value(board[:i] + to_move + board[i + 1 :]) for i in free]
        if to_move == learner_mark:
            return max(children, key=lambda o: _key(objective, o))
        n = len(children)
        return (
            sum((c[0] for c in children), Fraction(0)) / n,
            sum((c[1] for c in children), Fraction(0)) / n,
            sum((c[2] for c in children), Fraction(0)) / n,
        )

    return value("." * 9)


def random_vs_random() -> Outcome:
    """Outcome for the second player (O) when both players are uniformly random."""

    @functools.cache
    def value(board: str) -> Outcome:
        w = winner(board)
        if w is not None:
            return (
                (Fraction(1), Fraction(0), Fraction(0))
                if w == "O"
                else (Fraction(0), Fraction(0), Fraction(1))
            )
        free = [i for i, c in enumerate(board) if c == "."]
        if not free:
            return (Fraction(0), Fraction(1), Fraction(0))
        to_move = "X" if board.count("X") == board.count("O") else "O"
        children = [value(board[:i] + to_move + board[i + 1 :]) for i in free]
        n = len(children)
        return tuple(sum((c[k] for c in children), Fraction(0)) / n for k in range(3))  # type: ignore[return-value]

    return value("." * 9)


def _fmt(o: Outcome) -> str:
    return " / ".join(f"{100 * float(p):6.2f}%" for p in o) + f"   (score {float(o[0] - o[2]):+.4f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args()
    print("win / draw / loss of the learner against a uniformly random opponent (exact)")
    for mark, label in (("O", "learner moves second (O)"), ("X", "learner moves first (X)")):
        print(f"\n{label}:")
        for objective in ("score", "win", "safe"):
            print(f"  best for {objective:5s}: {_fmt(solve(mark, objective))}")
    print(f"\nboth uniformly random, second player's view: {_fmt(random_vs_random())}")


if __name__ == "__main__":
    main()
