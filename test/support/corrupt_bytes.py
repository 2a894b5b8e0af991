"""Serialized messages with a few bytes changed and cut short: inputs for differential tests."""

import random


def corrupted(serialized: bytes, rng: random.Random) -> bytes:
    """Return ``serialized`` with 1-3 bytes changed (never the encapsulation), maybe cut short."""
    data = bytearray(serialized)
    for _ in range(rng.randint(1, 3)):
        data[rng.randrange(4, len(data))] = rng.choice(
            [0, 1, 2, 0x7f, 0x80, 0xc3, 0xff, rng.randrange(256)])
    cut = rng.choice([len(data), rng.randrange(4, len(data) + 1)])
    return bytes(data[:cut])
