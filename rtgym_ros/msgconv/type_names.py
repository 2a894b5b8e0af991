"""
ROS interface types from strings ('pkg/msg/Type', 'pkg/srv/Type'), checked at load.

A config names types as text; a typo must fail at load, with the key, and say what is there
instead: the types a package has, or the interface packages that are importable here.
"""

import importlib
import importlib.util
from pathlib import Path
import re
from typing import Any

COMMON_INTERFACE_PACKAGES = (
    'std_msgs', 'sensor_msgs', 'geometry_msgs', 'nav_msgs', 'trajectory_msgs', 'rosgraph_msgs',
    'diagnostic_msgs', 'std_srvs', 'builtin_interfaces', 'control_msgs', 'shape_msgs',
    'visualization_msgs', 'stereo_msgs', 'tf2_msgs', 'example_interfaces', 'rcl_interfaces',
    'lifecycle_msgs', 'action_msgs', 'unique_identifier_msgs', 'ros_gz_interfaces',
)
_TYPE_NAME_RE = re.compile(r'([A-Za-z][A-Za-z0-9_]*)/(msg|srv)/([A-Za-z][A-Za-z0-9_]*)')
_KIND_WORD = {'msg': 'message', 'srv': 'service'}


def load_message_type(type_name: str, *, key: str) -> type:
    """Return the message class named 'pkg/msg/Type', with its C type support loaded."""
    return _load_interface(type_name, 'msg', key=key)


def load_service_type(type_name: str, *, key: str) -> type:
    """Return the service class named 'pkg/srv/Type', with its C type support loaded."""
    return _load_interface(type_name, 'srv', key=key)


def _load_interface(type_name: str, kind: str, *, key: str) -> type:
    package, name = _split_type_name(type_name, kind, key=key)
    module = _import_interface_module(package, kind, key=key)
    cls = getattr(module, name, None)
    if not _is_interface(cls, kind):
        found = sorted(n for n, v in vars(module).items() if _is_interface(v, kind))
        raise ValueError(
            f'{key}: expected a {_KIND_WORD[kind]} type in {package}/{kind}, got {name!r}; '
            f'{package}/{kind} has: {", ".join(found) or "nothing"}')
    if getattr(cls, '_TYPE_SUPPORT', None) is None:
        cls.__import_type_support__()
    if getattr(cls, '_TYPE_SUPPORT', None) is None:
        raise ValueError(
            f'{key}: {type_name} was found but its C type support could not be loaded; '
            f'rebuild or reinstall {package} for this Python')
    return cls


def _split_type_name(type_name: Any, kind: str, *, key: str) -> tuple[str, str]:
    match = _TYPE_NAME_RE.fullmatch(type_name) if isinstance(type_name, str) else None
    if match is not None and match.group(2) == kind:
        return match.group(1), match.group(3)
    hint = ''
    if match is not None:
        hint = f' (that names a {_KIND_WORD[match.group(2)]})'
    elif isinstance(type_name, str) and re.fullmatch(r'\w+/\w+', type_name):
        package, name = type_name.split('/')
        hint = f' (did you mean {package}/{kind}/{name}?)'
    raise ValueError(
        f"{key}: expected a {_KIND_WORD[kind]} type 'pkg/{kind}/Type', got {type_name!r}{hint}")


def _import_interface_module(package: str, kind: str, *, key: str) -> Any:
    module_name = f'{package}.{kind}'
    if _module_exists(package) and not is_interface_package(package):
        # Checked without importing it: a config must not run an arbitrary module's code.
        raise ValueError(
            f'{key}: expected a ROS interface package (with rosidl type support), got '
            f'{package!r}, an ordinary Python module; it was not imported')
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name not in (package, module_name):
            raise ValueError(f'{key}: importing {module_name} failed: {exc}') from exc
    found = ', '.join(p for p in COMMON_INTERFACE_PACKAGES if _module_exists(f'{p}.{kind}'))
    if _module_exists(package):
        raise ValueError(
            f'{key}: expected a package with {_KIND_WORD[kind]} types, got {package!r}, which has '
            f'no {kind} module; importable {kind} packages here: {found or "none"}')
    raise ValueError(
        f'{key}: expected an importable interface package, got {package!r} (is it installed and '
        f'the workspace sourced?); importable {kind} packages here: {found or "none"}')


def is_interface_package(package: str) -> bool:
    """Say whether ``package`` holds rosidl-generated interfaces, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(any(Path(location).glob(f'{package}_s__rosidl_typesupport_c*'))
               for location in spec.submodule_search_locations)


def _module_exists(module_name: str) -> bool:
    try:
        return importlib.util.find_spec(module_name) is not None
    except ImportError:
        return False


def _is_interface(obj: Any, kind: str) -> bool:
    if kind == 'srv':
        return (isinstance(obj, type) and hasattr(type(obj), '_TYPE_SUPPORT')
                and is_message_class(getattr(obj, 'Request', None))
                and is_message_class(getattr(obj, 'Response', None)))
    return is_message_class(obj)


def is_message_class(obj: Any) -> bool:
    """Tell rosidl-generated message classes from anything else (services, modules, typos)."""
    return (isinstance(obj, type) and hasattr(type(obj), '_TYPE_SUPPORT')
            and hasattr(type(obj), '_CREATE_ROS_MESSAGE') and hasattr(obj, 'SLOT_TYPES')
            and callable(getattr(obj, 'get_fields_and_field_types', None)))


def interface_name(msg_type: type) -> str:
    """Return 'pkg/msg/Type' for a generated class (its module is 'pkg.msg._type')."""
    package, kind = msg_type.__module__.split('.')[:2]
    return f'{package}/{kind}/{msg_type.__name__}'


def check_message_class(msg_type: Any, *, key: str) -> str:
    if not is_message_class(msg_type):
        raise ValueError(f'{key}: expected a ROS message class, got {msg_type!r}')
    return interface_name(msg_type)
