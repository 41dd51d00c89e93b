"""The live class: a teacher's position in a lecture deck that students follow, and the class's predict polls.

``class_store()`` is the process-wide store of every class (``state.py`` the interface and its rules,
``memory.py`` in this process, ``redis_store.py`` shared by several servers through Redis); ``codes`` makes and
checks class codes, teachers' keys and students' ids; ``teachers`` says who may start a class (the teacher
passphrase) and how often; ``students`` how a poll counts one student per browser (ids the store issues and
signs, one per session, issued at a bounded pace), both paced by ``buckets``' token buckets. No Streamlit here:
the Lecture page's side of a class is ``explorer/ui/classroom.py``.
"""

from explorer.classroom import codes
from explorer.classroom.state import (
    FAULTS,
    LIFETIME,
    MAX_CHOICE,
    MAX_CLASSES,
    MAX_CONTROLS,
    MAX_NAME,
    MAX_SLIDE,
    MAX_VOTERS,
    ClassesFull,
    ClassState,
    ClassStore,
    StoreUnavailable,
    class_store,
)

__all__ = [
    "FAULTS",
    "LIFETIME",
    "MAX_CHOICE",
    "MAX_CLASSES",
    "MAX_CONTROLS",
    "MAX_NAME",
    "MAX_SLIDE",
    "MAX_VOTERS",
    "ClassState",
    "ClassStore",
    "ClassesFull",
    "StoreUnavailable",
    "class_store",
    "codes",
]
