"""The library's silenced sections, entered and left by several threads."""

import os
import signal
import sys
import threading
import warnings

import pytest

from dp_glm_sklearn._warn import silenced


def _shown(action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    return [str(w.message) for w in caught]


def test_silenced_sections_in_threads_may_end_in_any_order():
    # With one catch_warnings per section, A ending first put the user's
    # filters back while B still ran (B's record-dependent warning was
    # shown), and B ending last left "ignore" installed for good.
    a_in, b_in, a_out, b_checked = (threading.Event() for _ in range(4))
    seen = {}

    def section_a():
        with silenced():
            a_in.set()
            seen["a saw b enter"] = b_in.wait(30)
        a_out.set()

    def section_b():
        seen["b saw a enter"] = a_in.wait(30)
        with silenced():
            b_in.set()
            seen["b saw a leave"] = a_out.wait(30)
            seen["inside"] = list(warnings.filters[:1])
            with warnings.catch_warnings(record=True) as caught:
                warnings.warn("from a private record", stacklevel=1)
            seen["caught_inside"] = len(caught)
        b_checked.set()

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        user_filters = list(warnings.filters)
        threads = [threading.Thread(target=section_a), threading.Thread(target=section_b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        # The interleaving under test happened (A in, B in, A out, B out):
        assert seen["b saw a enter"] and seen["a saw b enter"] and seen["b saw a leave"]
        assert b_checked.is_set()
        assert seen["inside"][0][0] == "ignore"  # B still silenced after A ended
        assert seen["caught_inside"] == 0
        assert warnings.filters == user_filters  # the user's filters, once both ended
        assert _shown(lambda: warnings.warn("after", stacklevel=1)) == ["after"]


def test_silenced_sections_nest():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = list(warnings.filters)
        with silenced():
            with silenced():
                warnings.warn("hidden", stacklevel=1)
            warnings.warn("hidden too", stacklevel=1)
        assert warnings.filters == before
        with pytest.raises(UserWarning):
            warnings.warn("shown", stacklevel=1)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="needs fork")
def test_a_child_that_leaves_the_section_it_was_forked_in_is_silenced_later():
    # The child reset the count of open sections to 0, then left the one it
    # was forked in: the count went to -1 and every later section in the
    # child silenced nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with silenced():
            pid = os.fork()
            if pid != 0:
                _, status = os.waitpid(pid, 0)
        if pid == 0:  # the child, out of the section it was forked in
            code = 1
            try:
                signal.alarm(30)  # a child deadlocked on the section's lock: end it
                with silenced():
                    warnings.warn("hidden in the child", stacklevel=1)
                try:
                    warnings.warn("shown in the child", stacklevel=1)
                except UserWarning:
                    code = 0
            finally:
                os._exit(code)
    assert os.waitstatus_to_exitcode(status) == 0
