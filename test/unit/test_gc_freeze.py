"""The env's gc.freeze: garbage collected first, frozen while an env lives, unfrozen after."""

import gc
import weakref

from rtgym_ros.core import gc_freeze


class _Node:
    pass


def _garbage_cycle() -> weakref.ref:
    """Make two objects that refer to each other and nothing else; return a weak reference."""
    first, second = _Node(), _Node()
    first.other, second.other = second, first
    return weakref.ref(first)


def test_an_env_freezes_after_collecting_and_the_last_one_out_unfreezes():
    assert gc.get_freeze_count() == 0
    one, two = object(), object()
    garbage = _garbage_cycle()
    try:
        gc_freeze.acquire(one, True)
        assert garbage() is None, 'the garbage there was was collected, not frozen'
        assert gc.get_freeze_count() > 0
        gc_freeze.acquire(two, True)
        gc_freeze.release(one)
        assert gc.get_freeze_count() > 0, 'another env still lives'
    finally:
        gc_freeze.release(one)
        gc_freeze.release(two)
    assert gc.get_freeze_count() == 0


def test_settle_freezes_what_lives_now_and_collects_what_does_not():
    owner = object()
    try:
        gc_freeze.acquire(owner, True)
        frozen = gc.get_freeze_count()
        kept = [_Node() for _ in range(100)]  # an episode's new long-lived objects
        garbage = _garbage_cycle()
        gc_freeze.settle(owner)
        assert garbage() is None
        assert gc.get_freeze_count() >= frozen + len(kept)
    finally:
        gc_freeze.release(owner)
    assert gc.get_freeze_count() == 0


def test_disabled_or_unknown_owners_change_nothing():
    owner = object()
    gc_freeze.acquire(owner, False)
    gc_freeze.settle(owner)
    gc_freeze.release(owner)
    assert gc.get_freeze_count() == 0
