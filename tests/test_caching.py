"""The shared results cache: single flight, byte budget, and runs that fail or are interrupted.

Streamlit stops a script run by raising ``StopException`` (a ``BaseException``) inside it when its visitor moves
a widget or leaves. A run that other students wait on must not hand that to them.
"""

import gc
import threading
import time
import weakref

import numpy as np
import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from explorer.caching import ByteBudgetCache
from explorer.errors import InputError


def _run_waiters(cache, key, compute, count):
    results, errors = [None] * count, [None] * count

    def ask(i):
        try:
            results[i] = cache.get(key, compute)
        except BaseException as error:
            errors[i] = error

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    return threads, results, errors


def test_concurrent_requests_run_once():
    cache = ByteBudgetCache(10**6)
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.2)
        return np.arange(4)

    threads, results, errors = _run_waiters(cache, "k", compute, 8)
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert errors == [None] * 8
    assert all(r is results[0] for r in results)


def test_an_interrupted_run_never_fails_its_waiters():
    cache = ByteBudgetCache(10**6)
    started, release = threading.Event(), threading.Event()
    runs = []

    def interrupted():
        runs.append("interrupted")
        started.set()
        release.wait(5)
        raise StopException()  # what Streamlit raises when this student moves a slider

    def computed():
        runs.append("computed")
        return "the result"

    first_error = []

    def first():
        try:
            cache.get("k", interrupted)
        except BaseException as error:
            first_error.append(error)

    runner = threading.Thread(target=first)
    runner.start()
    assert started.wait(5)
    threads, results, errors = _run_waiters(cache, "k", computed, 6)
    time.sleep(0.2)  # the six are waiting on the interrupted run
    release.set()
    for thread in [runner, *threads]:
        thread.join(10)
    assert isinstance(first_error[0], StopException)  # only the interrupted student gets it
    assert errors == [None] * 6
    assert results == ["the result"] * 6
    assert runs.count("computed") == 1  # one waiter ran it, the rest shared that run


def test_an_ordinary_error_reaches_that_runs_waiters_and_is_not_kept():
    cache = ByteBudgetCache(10**6)
    release = threading.Event()

    def failing():
        release.wait(5)
        raise InputError("The text is empty.")

    threads, _, errors = _run_waiters(cache, "k", failing, 5)
    time.sleep(0.2)
    release.set()
    for thread in threads:
        thread.join(10)
    assert all(isinstance(e, InputError) and str(e) == "The text is empty." for e in errors)
    # The next request runs again rather than getting a stored failure.
    assert cache.get("k", lambda: "fine now") == "fine now"


class _Big:
    pass


def test_a_failed_runs_objects_are_released():
    cache = ByteBudgetCache(10**6)
    refs = []

    def failing():
        held = _Big()  # stands for the tensors a failed model run held in its frames
        refs.append(weakref.ref(held))
        raise InputError("no")

    with pytest.raises(InputError):
        cache.get("k", failing)
    gc.collect()
    assert refs[0]() is None
    assert len(cache._pending) == 0


def test_an_interrupted_runs_objects_are_released():
    cache = ByteBudgetCache(10**6)
    refs = []

    def interrupted():
        held = _Big()
        refs.append(weakref.ref(held))
        raise StopException()

    with pytest.raises(StopException):
        cache.get("k", interrupted)
    gc.collect()
    assert refs[0]() is None


def test_budget_counts_values_and_keys_and_drops_least_recent():
    cache = ByteBudgetCache(2_000)
    for i in range(5):
        cache.get(("text", str(i)), lambda: np.zeros(100, dtype=np.float32))  # 400 bytes + overhead each
    assert cache.total <= cache.budget
    assert ("text", "0") not in cache and ("text", "4") in cache
    big = cache.get("huge", lambda: np.zeros(10_000))  # larger than the budget: returned, not kept
    assert big.shape == (10_000,) and "huge" not in cache
