"""
Timestamped observation slots: the newest data of a topic, and how old it is.

A subscription callback only stores a reference to the message and its stamp (on the io
thread; an image slot's frame, read from the serialized bytes, on the serialized receiver's
thread; a JointState slot's, read from a raw take's bytes, on the io thread); conversion to
numpy happens once, at capture, on the executor thread. A condition
variable lets the capture wait, bounded, for data newer than a given time.

Two rules of the real ROS world are kept here:

- several publishers on one ``JointState`` topic (an arm and a gripper on ``/joint_states``):
  a slot read by joint name keeps the newest values of each configured joint, each with its
  own stamp; the slot's stamp is its oldest joint's, and the message it keeps carries the
  header of the message that stamped that joint. A field a message leaves empty (the
  message definition allows it) is not given for its joints: a joint whose configured field
  never came is missing, one whose field stopped coming goes stale;
- stamps ahead of the node's clock (clock skew between machines) by more than
  ``stamp_tolerance`` never count as fresh, whichever joint carries them.
"""

import threading
import time
from typing import Any, Callable, Iterable

import numpy as np
from rtgym_ros.core.validate import short_repr
from rtgym_ros.msgconv.fields import has_header, header_stamp
from rtgym_ros.msgconv.readers import FieldReader, JOINT_ARRAYS
from rtgym_ros.robot.spec import ObservationSlotSpec
from sensor_msgs.msg import JointState


SIM_TIME_POLL = 1e-3
"""Wall seconds between looks at a simulator's clock while a wait bounded on it runs."""
_FEW_VALUES = 32  # a space of at most this many values is bounds-checked in Python


class Slot:
    """The newest data of one configured topic, with its stamp on the node's clock."""

    def __init__(self, spec: ObservationSlotSpec, *, now: Callable[[], float],
                 stamp_tolerance: float = 0.1,
                 warn: Callable[[str, str], None] | None = None) -> None:
        """
        Hold no data yet.

        :param warn: ``warn(kind, message)``, for a message a driver got wrong (a JointState
            field with another number of values than of names); cheap, from the io thread.
        """
        self.spec = spec
        self._warn = warn
        self.name = spec.name
        self._now = now
        self._tolerance = stamp_tolerance
        self._changed = threading.Condition()
        self.message: Any = None
        self.stamp = -np.inf
        """The data's stamp on the node's clock: its oldest joint's, read by joint name."""
        self._newest = -np.inf  # the newest joint's stamp: one ahead of the clock is not fresh
        self._zero_header = False  # the header stamp was 0: stamped on arrival
        self.count = 0
        """Messages received that carried the slot's data (a JointState of other joints: not)."""
        self._aborted = False
        self._header_stamped = spec.use_header_stamp and has_header(spec.reader.msg_type)
        self._joints = (_JointTable(spec.reader.joint_names, spec.reader.joint_fields)
                        if spec.reader.joint_names else None)
        self._transform = spec.transform.apply if spec.transform is not None else None
        self._last_read: Any = None  # the message read last (a view on it must not be shared)
        space = spec.space
        self._bounded = np.issubdtype(space.dtype, np.floating) or bool(
            np.any(space.low > np.iinfo(space.dtype).min)
            or np.any(space.high < np.iinfo(space.dtype).max))
        # A few values (joints, a pose) are checked in Python: a tenth of the four numpy calls'
        # time, which the capture pays right after a wake-up.
        self._bounds = (list(zip(space.low.ravel().tolist(), space.high.ravel().tolist()))
                        if self._bounded and space.low.size <= _FEW_VALUES else None)

    @property
    def reader(self) -> FieldReader:
        return self.spec.reader

    # -- io thread ------------------------------------------------------------------------------

    def store(self, message: Any) -> None:
        """Subscription callback: keep the message (or image frame) and its stamp, unconverted."""
        received = self._now()
        header = header_stamp(message) if self._header_stamped else None
        # A zero header stamp means the publisher did not set it: use the receive time.
        stamp = header if header else received
        zero_header = header == 0.0
        with self._changed:
            if self._joints is None:
                self.message, self.stamp, self._newest = message, stamp, stamp
                self._zero_header = zero_header
            else:
                merged = self._joints.update(message, stamp, zero_header, self.count + 1)
                if self._joints.malformed and self._warn is not None:
                    self._say_malformed(message)
                if merged is None:
                    return  # other joints, or fields left empty: nothing of this slot came
                self.message = merged
                self.stamp, self._newest = self._joints.oldest(), self._joints.newest()
            self.count += 1
            self._changed.notify_all()

    def _say_malformed(self, message: Any) -> None:
        names = len(message.name)
        fields = ', '.join(f'{len(getattr(message, field))} {field} values'
                           for field in self._joints.malformed)
        self._warn(f'{self.name} malformed', (
            f'observations.{self.name}: a JointState message with {names} names and {fields}: '
            'those fields are not taken (the message definition allows one value per name, '
            'or none)'))

    # -- any thread -----------------------------------------------------------------------------

    def forget_after(self, now: float, *, jumped_from: float) -> None:
        """
        Forget data stamped after ``now``: the clock has just gone back to ``now``.

        Data of the old time base is stamped later than that (a receive stamp included). What a
        simulator sent of its new time base before the rewound ``/clock`` (DDS does not order
        messages across topics) is stamped at or before ``now``, and stays. A clock gone back
        to its origin (a simulator reset to t = 0) keeps data stamped exactly 0 too, stamped on
        arrival: the reset state, which a zero stamp cannot tell from an unset one; if it came
        within ``stamp_tolerance`` of the jump (``jumped_from``: the clock's time before it),
        not the last message of a publisher that went silent long before.
        """
        with self._changed:
            if self._newest <= now:
                return
            origin = now <= self._tolerance
            since = jumped_from - self._tolerance
            if self._joints is not None:
                if origin:
                    self._joints.restamp_zero_headers(now, since)
                if self._joints.newest() <= now:
                    self.stamp, self._newest = self._joints.oldest(), self._joints.newest()
                    return
                self._joints.clear()
            elif origin and self._zero_header and self.stamp >= since:
                self.stamp = self._newest = now
                return
            self.message, self.stamp, self._newest = None, -np.inf, -np.inf

    def abort(self) -> None:
        """End every wait now (the env is closing), and every later one."""
        with self._changed:
            self._aborted = True
            self._changed.notify_all()

    def snapshot(self) -> tuple[Any, float]:
        with self._changed:
            return self.message, self.stamp

    def age(self, now: float) -> float:
        """Seconds since the data was stamped (inf before the first message)."""
        return now - self.stamp

    def from_the_future(self, now: float) -> bool:
        """Say whether a stamp (any joint's) is ahead of the clock by more than the tolerance."""
        return self._newest - now > self._tolerance

    def is_stale(self, now: float) -> bool:
        """Say whether the data is older than ``max_age``, or stamped in the future."""
        if self.from_the_future(now):
            return True
        return self.spec.max_age is not None and self.age(now) > self.spec.max_age

    def missing(self) -> list[str]:
        """Return what never arrived: the slot, some of its joints, or fields of a joint."""
        if self._joints is not None:
            with self._changed:  # a message taken in joint by joint fills the table in steps
                return [f'{self.name}.{joint}' for joint in self._joints.unseen()]
        return [] if self.message is not None else [self.name]

    def names_heard(self) -> tuple[str, ...] | None:
        """
        Return the joints the last message named, when it named none of this slot's.

        None when one of its joints came, or no message did (or the slot is not read by name).
        """
        if self._joints is None or self.message is not None:
            return None
        return self._joints.other_names

    def given_since(self, count: int) -> bool:
        """
        Say whether the messages counted after ``count`` gave all of the slot's data.

        One message does for most slots; a ``JointState`` read by joint name needs every
        configured joint and field, which several publishers may share (an arm, a gripper).
        """
        with self._changed:
            return self.count > count and (
                self._joints is None or self._joints.given_after(count))

    def not_given_since(self, count: int) -> list[str]:
        """Return what no message counted after ``count`` gave (names as ``missing``)."""
        with self._changed:
            if self._joints is None:
                return [] if self.count > count else [self.name]
            return [f'{self.name}.{name}' for name in self._joints.not_given_after(count)]

    def stamped_by(self, time_: float, now: float) -> list[tuple[str, float]]:
        """Return what holds data stamped at or before ``time_`` (as ``missing``), with its age."""
        if self._joints is not None:
            with self._changed:  # the table writes its kept message's stamp into its arrays
                found = self._joints.stamped_by(time_)
            return [(f'{self.name}.{name}', now - stamp) for name, stamp in found]
        return [(self.name, self.age(now))] if self.message is not None \
            and self.stamp <= time_ else []

    def wait_newer_than(self, time_: float, *, timeout: float,
                        clock: Callable[[], float] | None = None) -> bool:
        """Block until data stamped after ``time_`` (and not in the future) is here."""
        return self.wait_for(
            lambda: time_ < self.stamp and self._newest <= self._now() + self._tolerance,
            timeout=timeout, clock=clock)

    def wait_for(self, ready: Callable[[], bool], *, timeout: float,
                 clock: Callable[[], float] | None = None) -> bool:
        """
        Block until ``ready()``, at most ``timeout`` wall seconds, or seconds of ``clock``.

        A simulator's clock (``/clock``) runs faster or slower than the wall, or stops: a
        wait bounded on it looks at it every :data:`SIM_TIME_POLL` wall seconds, so it lasts
        its time in the simulator whatever the simulator's speed.
        """
        with self._changed:
            if clock is None:
                return self._changed.wait_for(lambda: self._aborted or ready(),
                                              timeout=timeout) and not self._aborted
            deadline = clock() + timeout
            while not (self._aborted or ready()):
                left = deadline - clock()
                if left <= 0.0:
                    return False
                self._changed.wait(min(left, SIM_TIME_POLL))
            return not self._aborted

    # -- executor thread -----------------------------------------------------------------------

    def read(self) -> np.ndarray:
        """
        Convert the newest data (transformed), or zeros of the slot's space before any.

        Every call returns an array of its own: a reader that returns a view on the message
        (images) is copied when the same message is read again, so two observations never
        share memory (users keep them; Gymnasium's ``check_env`` checks it).
        """
        message, _ = self.snapshot()
        if message is None:
            space = self.spec.space
            return np.zeros(space.shape, space.dtype)
        value = self.spec.reader.read(message)
        if self._transform is not None:
            return self._transform(value)
        if self.spec.reader.returns_view:
            if message is self._last_read:
                value = value.copy()
            self._last_read = message
        return value

    def outside(self, value: np.ndarray) -> bool:
        """Say whether ``value`` is outside the slot's space (NaN included)."""
        if not self._bounded:
            return False
        if self._bounds is not None:
            for item, (low, high) in zip(value.ravel().tolist(), self._bounds):
                if not low <= item <= high:  # NaN too
                    return True
            return False
        space = self.spec.space
        return not bool(np.all((value >= space.low) & (value <= space.high)))

    def describe_outside(self, value: np.ndarray) -> str:
        """
        Say which values of ``value`` are outside the slot's space, for a warning or an error.

        Cheap for an image (a few numpy passes, no list of its pixels): it runs at a capture.
        A NaN compares false with both bounds, so it is counted apart and named.
        """
        space = self.spec.space
        outside = int(value.size - np.count_nonzero((value >= space.low) & (value <= space.high)))
        nan = int(np.count_nonzero(np.isnan(value))) if value.dtype.kind in 'fc' else 0
        text = f'{outside} of {value.size} values outside' + (f' ({nan} NaN)' if nan else '')
        return f'{text}: {short_repr(value)}'

    def clip(self, value: np.ndarray) -> np.ndarray:
        """Return ``value`` clipped into the slot's space; NaN stays NaN (it has no place)."""
        space = self.spec.space
        return np.clip(value, space.low, space.high).astype(space.dtype, copy=False)


class _JointTable:
    """
    The newest position, velocity and effort of each configured joint, each with its stamp.

    Stamps are kept per joint and configured field: a message gives a field only when it
    has one value per name, so an empty one (allowed) or a malformed one neither changes
    nor refreshes it.

    A message that gives every joint and field (one publisher, the common case) is only kept
    as it is: its stamp, header flag and count stand for every cell, and are written into the
    arrays when something asks for cells (``_settle``). On the io thread, right after a
    wake-up, each numpy call costs 5-20 µs; a message then takes no numpy call at all.
    """

    def __init__(self, joint_names: tuple[str, ...], fields: tuple[str, ...]) -> None:
        self.names = joint_names
        self._index = {name: i for i, name in enumerate(joint_names)}
        self._fields = fields
        # 'name' always has one value per name: with no field configured, naming refreshes.
        self._stamped = fields or ('name',)
        self._covers: dict[tuple[str, ...], bool] = {}
        self._values = np.zeros((len(JOINT_ARRAYS), len(joint_names)))
        self._stamps = np.full((len(self._stamped), len(joint_names)), -np.inf)
        self._zero_header = np.zeros(self._stamps.shape, bool)
        self._headers = np.full(self._stamps.shape, None, object)  # of the message stamping each
        self._given = np.zeros(self._stamps.shape, np.int64)  # the count of the message, each
        self._whole: tuple | None = None  # (message, stamp, zero header, count): read as it is
        self._settled = True  # the arrays hold what _whole says of every cell
        self.malformed: list[str] = []
        """The fields of the last message taken in with another number of values than of names."""
        self.other_names: tuple[str, ...] | None = None
        """The joints of the last message that named none of ours (a reset's error says them)."""

    def update(self, message: Any, stamp: float, zero_header: bool, count: int) -> Any:
        """
        Take a JointState in; return the message to read (None: it gives none of our data).

        :param count: the slot's count of this message, kept for each joint and field it gave.
        """
        names = tuple(message.name)
        covers = self._covers.get(names)
        if covers is None:
            covers = self._covers[names] = set(self.names) <= set(names)
            if len(self._covers) > 16:
                self._covers.clear()
        size = len(names)
        if self.malformed:
            self.malformed = []
        if covers and all(len(getattr(message, field)) == size for field in self._fields):
            # One publisher with every configured joint and field: read it as it is.
            self._whole = (message, stamp, zero_header, count)
            self._settled = False
            return message
        if not any(name in self._index for name in names):
            self.other_names = names
            return None  # another publisher's joints
        if self._whole is not None:  # from now on, values come joint by joint
            whole, self._whole = self._whole, None
            self._absorb(*whole)  # every cell: it gave every joint and field
            self._settled = True
        if not self._absorb(message, stamp, zero_header, count):
            return None  # our joints, but none of the configured fields
        return self._merged()

    def _absorb(self, message: Any, stamp: float, zero_header: bool, count: int) -> bool:
        """Keep what ``message`` gives of our joints; say whether it gave a configured field."""
        where = [(i, self._index[name]) for i, name in enumerate(message.name)
                 if name in self._index]
        if not where:
            return False
        source = np.array([i for i, _ in where])
        target = np.array([j for _, j in where])
        size = len(message.name)
        for row, field in enumerate(JOINT_ARRAYS):
            values = np.asarray(getattr(message, field), dtype=np.float64)
            if values.size == size:
                self._values[row, target] = values[source]
            elif values.size and field in self._fields:
                self.malformed.append(field)
        gave = False
        for row, field in enumerate(self._stamped):
            if len(getattr(message, field)) == size:
                self._stamps[row, target] = stamp
                self._zero_header[row, target] = zero_header
                self._headers[row, target] = message.header
                self._given[row, target] = count
                gave = True
        return gave

    def _merged(self) -> JointState:
        """Return the values as one message, with the header of the part stamped oldest."""
        merged = JointState()
        merged.name = list(self.names)
        merged.position, merged.velocity, merged.effort = (row.tolist() for row in self._values)
        came = self._stamps > -np.inf
        if came.any():
            header = self._headers.flat[int(np.argmin(np.where(came, self._stamps, np.inf)))]
            # Field by field: a raw take's header is no std_msgs Header (joint_state_cdr).
            merged.header.stamp.sec = header.stamp.sec
            merged.header.stamp.nanosec = header.stamp.nanosec
            merged.header.frame_id = header.frame_id
        return merged

    def _settle(self) -> None:
        """Write what the whole message kept as it is says of every cell into the arrays."""
        if not self._settled:
            _, stamp, zero_header, count = self._whole
            self._stamps[:] = stamp
            self._zero_header[:] = zero_header
            self._given[:] = count
            self._settled = True

    def given_after(self, count: int) -> bool:
        """Say whether messages counted after ``count`` gave every joint's configured fields."""
        self._settle()
        return bool((self._given > count).all())

    def not_given_after(self, count: int) -> list[str]:
        """Joints (``joint``), or fields (``joint.field``), no message after ``count`` gave."""
        self._settle()
        return self._named(self._given <= count)

    def oldest(self) -> float:
        """Return the earliest stamp of any joint's field (-inf while one never came)."""
        if self._whole is not None:
            return self._whole[1]
        return float(self._stamps.min())

    def newest(self) -> float:
        """Return the latest stamp of any joint's field (-inf before any)."""
        if self._whole is not None:
            return self._whole[1]
        return float(self._stamps.max())

    def restamp_zero_headers(self, now: float, since: float) -> None:
        """
        Stamp at ``now`` what came with a zero header stamp since ``since`` (stamped on arrival).

        The clock went back to 0: what came just before may be the reset state.
        """
        if self._whole is not None:  # it stands for every cell
            message, stamp, zero_header, count = self._whole
            if zero_header and stamp >= since:
                self._whole = (message, now, zero_header, count)
                self._settled = False
            return
        recent = self._zero_header & (self._stamps >= since)
        self._stamps[recent] = now

    def unseen(self) -> list[str]:
        """Joints none of whose fields came (``joint``), or some fields (``joint.field``)."""
        if self._whole is not None:
            return []  # it gave every joint and field
        return self._named(self._stamps == -np.inf)

    def _named(self, cells: np.ndarray) -> list[str]:
        """Name the marked cells: a joint all of whose fields are marked, else its fields."""
        named = []
        for column, name in enumerate(self.names):
            fields = [field for field, marked in zip(self._stamped, cells[:, column]) if marked]
            if len(fields) == len(self._stamped):
                named.append(name)
            else:
                named.extend(f'{name}.{field}' for field in fields)
        return named

    def stamped_by(self, time_: float) -> list[tuple[str, float]]:
        """Joints (``joint``), or fields (``joint.field``), stamped at or before ``time_``."""
        self._settle()
        found = []
        for column, name in enumerate(self.names):
            stamps = self._stamps[:, column]
            old = [(field, stamp) for field, stamp in zip(self._stamped, stamps)
                   if -np.inf < stamp <= time_]
            if old and len(old) == len(self._stamped):
                found.append((name, float(stamps.max())))
            else:
                found.extend((f'{name}.{field}', float(stamp)) for field, stamp in old)
        return found

    def clear(self) -> None:
        self._values[:] = 0.0
        self._stamps[:] = -np.inf
        self._zero_header[:] = False
        self._headers[:] = None
        self._given[:] = 0
        self._whole = None
        self._settled = True


def wait_all(slots: Iterable[Slot], ready: Callable[[Slot], Callable[[], bool]], *,
             timeout: float, clock: Callable[[], float] | None = None) -> list[Slot]:
    """
    Wait for ``ready(slot)()`` on every slot with one shared bound; return the late ones.

    ``timeout``: wall seconds, or seconds of ``clock`` (:meth:`Slot.wait_for`).
    """
    now = time.monotonic if clock is None else clock
    deadline = now() + timeout
    return [slot for slot in slots
            if not slot.wait_for(ready(slot), timeout=max(0.0, deadline - now()), clock=clock)]


class SignalSlot:
    """
    Reward or termination from a one-number topic, counted per time-step.

    A message counts for the time-step it arrives in: ``take(since)`` returns the newest value
    received after ``since`` (the previous capture), and for a termination topic whether any
    ``true`` arrived since; older values are not reused. ``clear()`` at reset.
    """

    def __init__(self, reader: FieldReader, *, now: Callable[[], float]) -> None:
        self._reader = reader
        self._now = now
        self._lock = threading.Lock()
        self.value: float | None = None
        self.received = -np.inf
        self._any_true_since = -np.inf

    def store(self, message: Any) -> None:
        value = float(self._reader.read(message)[0])
        received = self._now()
        with self._lock:
            self.value, self.received = value, received
            if value:
                self._any_true_since = max(self._any_true_since, received)

    def take(self, since: float) -> tuple[float | None, bool]:
        """Return (newest value received after ``since`` or None, any true after ``since``)."""
        with self._lock:
            fresh = self.value if self.received > since else None
            return fresh, self._any_true_since > since

    def clear(self) -> None:
        with self._lock:
            self.value, self.received, self._any_true_since = None, -np.inf, -np.inf
