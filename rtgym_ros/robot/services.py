"""
Services a robot config names (reset, pause, unpause, lockstep's step): any type, any request.

``{service: /world/default/control, type: ros_gz_interfaces/srv/ControlWorld,
request: {world_control: {pause: true}}, success: success, retry: false}``: the request's
fields are set from YAML (nested), checked at load against the type (unknown field, wrong
type), and the response can be checked (``success: <bool field>``). ``retry`` says whether an
unanswered request is sent again every second until the bound: right for an idempotent reset
(a restarted robot may miss the first one), wrong for a step.
"""

from dataclasses import dataclass, field
import re
import threading
import time
from typing import Any, Callable

from rtgym_ros.core.validate import check_bool, check_int, check_number, short_repr
from rtgym_ros.msgconv.type_names import interface_name

RETRY_PERIOD = 1.0  # s before an unanswered request is sent again (retry: true)
_POLL = 0.01  # s between checks of readiness or an answer


@dataclass
class ServiceSpec:
    """A service call with its request fields, or a ``pkg.mod:fn`` function, with a bound."""

    service: str | None = None
    service_type: type | None = None
    request: dict[str, Any] = field(default_factory=dict)
    """Field paths ('world_control.pause') to values, set on every request."""
    success: str | None = None
    """A bool field of the response that must be true (e.g. 'success'); None: no check."""
    retry: bool = True
    function: Callable | None = None
    timeout: float = 5.0

    @property
    def data(self) -> bool | None:
        """Return the ``data`` of a std_srvs/SetBool request (pause: true, unpause: false)."""
        return self.request.get('data')


def flatten_request(request: Any, *, key: str) -> dict[str, Any]:
    """Return ``{a: {b: 1}}`` as ``{'a.b': 1}``; values stay as YAML gave them."""
    if not isinstance(request, dict):
        raise ValueError(f'{key} must be a mapping of request fields, got {short_repr(request)}')
    flat: dict[str, Any] = {}
    for name, value in request.items():
        if isinstance(value, dict):
            for sub, leaf in flatten_request(value, key=f'{key}.{name}').items():
                flat[f'{name}.{sub}'] = leaf
        else:
            flat[str(name)] = value
    return flat


def build_request(service_type: type, fields: dict[str, Any], *, key: str) -> Any:
    """Return a request with ``fields`` set; a field that does not exist or fit names ``key``."""
    request = service_type.Request()
    for path, value in fields.items():
        set_field(request, path, value, key=f'{key}.{path}')
    return request


def set_field(message: Any, path: str, value: Any, *, key: str) -> None:
    """Set a dotted field of a message, as rosidl's setters check it."""
    *parents, name = path.split('.')
    target = message
    for part in parents:
        if part not in target.get_fields_and_field_types():
            raise ValueError(f'{key}: {interface_name(type(target))} has no field {part!r}; '
                             f'fields: {", ".join(target.get_fields_and_field_types())}')
        target = getattr(target, part)
    fields = target.get_fields_and_field_types()
    if name not in fields:
        raise ValueError(f'{key}: {interface_name(type(target))} has no field {name!r}; '
                         f'fields: {", ".join(fields)}')
    value = _checked(fields[name], value, key=key)
    try:
        setattr(target, name, value)
    except (AssertionError, TypeError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f'{key} must fit the field type {fields[name]}, got '
                         f'{short_repr(value)} ({reason})') from None


_ARRAY = re.compile(r'sequence<(?P<element>.+?)(?:, (?P<bound>\d+))?>$'
                    r'|(?P<fixed_element>[^\[]+)\[(?P<size>\d+)\]$')
"""A sequence (bounded or not) or a fixed-size array, as rosidl's field type strings say."""
_INTEGER_RANGES = {
    f'{sign}int{bits}': (0, 2 ** bits - 1) if sign else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
    for sign in ('', 'u') for bits in (8, 16, 32, 64)}
_INTEGER_RANGES.update(octet=(0, 255), char=(0, 255), byte=(0, 255))


def _checked(type_string: str, value: Any, *, key: str) -> Any:
    """
    Return ``value`` for a field of ``type_string``, or say what the field takes.

    rosidl's generated setters check types only when ROS_PYTHON_CHECK_FIELDS is set: a YAML
    ``'yes'`` would otherwise become a request field unnoticed.
    """
    array = _ARRAY.match(type_string)
    if array is not None:
        if not isinstance(value, list):
            raise ValueError(f'{key} must be a list for the field type {type_string}, '
                             f'got {short_repr(value)}')
        size, bound = array['size'], array['bound']
        if size is not None and len(value) != int(size):  # unchecked, the rest is garbage
            raise ValueError(f'{key} must have {size} values for the field type '
                             f'{type_string}, got {len(value)}')
        if bound is not None and len(value) > int(bound):
            raise ValueError(f'{key} must have at most {bound} values for the field type '
                             f'{type_string}, got {len(value)}')
        element = array['element'] or array['fixed_element']
        return [_checked(element, item, key=f'{key}[{index}]') for index, item in enumerate(value)]
    if type_string == 'boolean':
        return check_bool(value, key=key)
    if type_string in ('float', 'double'):
        return check_number(value, key=key, allow_inf=True)
    if type_string in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[type_string]
        return check_int(value, key=key, minimum=low, maximum=high)
    if type_string.startswith(('string', 'wstring')):
        if not isinstance(value, str):
            raise ValueError(f'{key} must be a string for the field type {type_string}, '
                             f'got {short_repr(value)}')
        return value
    raise ValueError(f'{key}: the field type {type_string} is a message; set its fields '
                     f'(a mapping), got {short_repr(value)}')


def compile_service(value: dict, *, key: str, timeout: float, load_type: Callable,
                    default_request: dict[str, Any] | None = None,
                    retry: bool = True) -> ServiceSpec:
    """Check a service entry of a robot config (the type is loaded with ``load_type``)."""
    timeout = check_number(value.get('timeout', timeout), key=f'{key}.timeout', minimum=0.0)
    type_name = value.get('type', 'std_srvs/srv/Empty')
    service_type = load_type(type_name, key=f'{key}.type')
    request = dict(default_request or {}) if type_name.endswith('/SetBool') else {}
    if 'data' in value:
        if not type_name.endswith('/SetBool'):
            raise ValueError(f'{key}.data applies to std_srvs/srv/SetBool, got it for '
                             f'{type_name}; give request: {{...}} instead')
        request['data'] = check_bool(value['data'], key=f'{key}.data')
    request.update(flatten_request(value.get('request', {}), key=f'{key}.request'))
    build_request(service_type, request, key=f'{key}.request')
    success = value.get('success')
    if success is None and 'success' in service_type.Response.get_fields_and_field_types():
        success = 'success'
    if success is not None:
        _check_response_field(service_type, success, key=f'{key}.success')
    return ServiceSpec(service=value['service'], service_type=service_type, request=request,
                       success=success, timeout=timeout,
                       retry=check_bool(value.get('retry', retry), key=f'{key}.retry'))


def _check_response_field(service_type: type, path: str, *, key: str) -> None:
    target = service_type.Response()
    for part in str(path).split('.'):
        fields = target.get_fields_and_field_types()
        if part not in fields:
            raise ValueError(f'{key}: the response of {interface_name(service_type)} has no '
                             f'field {path!r}; fields: {", ".join(fields)}')
        target = getattr(target, part)
    if not isinstance(target, bool):
        raise ValueError(f'{key}: {path!r} must be a bool field of the response, '
                         f'got {type(target).__name__}')


class ServiceCaller:
    """Call configured services on a client, bounded, abortable from another thread."""

    def __init__(self, describe: Callable[[str, str], str],
                 warn: Callable[[str, str], None] = lambda kind, message: None) -> None:
        self._describe = describe
        self._warn = warn  # (kind, message): a request sent again is said
        self.aborted = threading.Event()

    def call(self, spec: ServiceSpec, client: Any, *, key: str,
             fields: dict[str, Any] | None = None,
             sent: Callable[[], None] = lambda: None, wake_on_answer: bool = False) -> Any:
        """
        Send the request (with ``fields`` on top of the config's); return the response.

        ``spec.timeout`` bounds the whole call: the wait for the server and the wait for its
        answer share one deadline. ``sent`` is called as each request goes out: when an
        answer is lost, every request may have been served, and the answered one is the last.
        ``wake_on_answer``: return as the answer comes; else at the next poll, up to
        :data:`_POLL` later, which gives a simulator that answers before it applies a reset
        that long to apply it before the env looks at its data.
        """
        type_name = interface_name(spec.service_type)
        start = time.monotonic()
        deadline = start + spec.timeout
        if not self.wait_until(client.service_is_ready, spec.timeout):
            raise TimeoutError(
                f'{key}: service {client.srv_name} is not available (waited {spec.timeout} '
                f's): {self._describe(client.srv_name, type_name)}')
        ready_after = time.monotonic() - start
        request = build_request(spec.service_type, {**spec.request, **(fields or {})}, key=key)
        while True:
            done = threading.Event()
            sent()
            future = client.call_async(request)
            future.add_done_callback(lambda _: done.set())
            remaining = deadline - time.monotonic()
            wait = min(RETRY_PERIOD, remaining) if spec.retry else remaining
            if self.wait_until(done.is_set, max(0.0, wait),
                               wake=done if wake_on_answer else None):
                break
            client.remove_pending_request(future)
            if not spec.retry or remaining <= RETRY_PERIOD:
                raise TimeoutError(
                    f'{key}: service {client.srv_name} did not answer within {spec.timeout} s '
                    f'(the bound of the call; it was available after {ready_after:.2f} s): '
                    f'{self._describe(client.srv_name, type_name)}')
            self._warn(f'{key} sent again', (
                f'{key}: service {client.srv_name} did not answer within {RETRY_PERIOD:g} s: '
                'the request is sent again (retry: true), so the server may serve it twice; '
                'set retry: false for a service that must not run twice'))
        response = future.result()
        check_response(spec, response, key=key, service=client.srv_name)
        return response

    def wait_until(self, ready: Callable[[], bool], timeout: float, *,
                   wake: threading.Event | None = None) -> bool:
        """
        Poll ``ready`` for at most ``timeout`` s; give up at once when aborted.

        ``wake``: set when ``ready`` turns true; the wait between polls ends when it is set.
        """
        deadline = time.monotonic() + timeout
        pause = time.sleep if wake is None else wake.wait
        while not ready():
            if self.aborted.is_set():
                raise RuntimeError('the env is closing')
            remaining = deadline - time.monotonic()
            if remaining <= 0.0:
                return False
            pause(min(_POLL, remaining))
        return True


def check_response(spec: ServiceSpec, response: Any, *, key: str, service: str) -> None:
    """Raise RuntimeError when the configured success field of ``response`` is false."""
    if spec.success is None:
        return
    value = response
    for part in spec.success.split('.'):
        value = getattr(value, part)
    if not value:
        raise RuntimeError(f'{key}: service {service} failed ({spec.success} is false): '
                           f'{short_repr(getattr(response, "message", ""))}')
