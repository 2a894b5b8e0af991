"""The env config's shared checks: booleans that are bools, error messages of bounded length."""

from dummy_interfaces import CountingInterface
import numpy as np
import pytest
from rtgym_ros.core import validate
from rtgym_ros.core.config import BOOL_KEYS, DEFAULT_CONFIG_DICT, resolve_config
from rtgym_ros.core.validate import check_bool, check_fits_in_memory, short_repr
from rtgym_ros.ros.deadline import LAST_STRETCH
from rtgym_ros.ros.runtime import check_node_name

# Each of these acted as True (or False) before: bool('false') is True.
NOT_BOOLS = ['false', 'False', '0', 'n', 'off', '', 0, 1, 0.0, None, [False]]


def test_every_boolean_key_is_checked():
    assert set(BOOL_KEYS) == {'act_in_obs', 'reset_act_buf', 'benchmark', 'wait_on_done',
                              'last_act_on_reset', 'use_sim_time', 'gc_freeze'}
    assert all(isinstance(DEFAULT_CONFIG_DICT[key], bool) for key in BOOL_KEYS)


@pytest.mark.parametrize('key', BOOL_KEYS)
@pytest.mark.parametrize('value', NOT_BOOLS, ids=repr)
def test_config_refuses_what_is_not_a_bool(key, value):
    with pytest.raises(ValueError) as error:
        resolve_config({'interface': CountingInterface, key: value})
    message = str(error.value)
    assert f"config['{key}'] must be true or false" in message and repr(value) in message


@pytest.mark.parametrize('key', BOOL_KEYS)
@pytest.mark.parametrize('value', [True, False, np.bool_(True), np.bool_(False)], ids=repr)
def test_config_keeps_bools(key, value):
    assert getattr(resolve_config({'interface': CountingInterface, key: value}), key) \
        is bool(value)


def test_check_bool_returns_a_python_bool():
    assert check_bool(np.bool_(True), key='k') is True
    with pytest.raises(ValueError, match=r"^k must be true or false, got 'yes' \(str\)$"):
        check_bool('yes', key='k')


@pytest.mark.parametrize('value', [
    'x' * 1_000_000,
    list(range(1_000_000)),
    [[list(range(1000))] * 1000] * 1000,  # a million-element nest, shared like a YAML bomb
    {str(i): i for i in range(100_000)},
    np.zeros(1_000_000),
], ids=['str', 'list', 'nested', 'dict', 'array'])
def test_short_repr_is_bounded(value):
    assert len(short_repr(value)) < 400


@pytest.mark.parametrize('value', [-1e-6, 0.0, 2.0, 'fast', float('nan'), True], ids=repr)
def test_timer_slack_out_of_range_fails_with_the_key(value):
    with pytest.raises(ValueError, match=r"config\['timer_slack'\]"):
        resolve_config({'interface': CountingInterface, 'timer_slack': value})


@pytest.mark.parametrize('value', [None, 1e-9, 5e-5, 1])
def test_timer_slack_in_range_or_none_is_kept(value):
    assert resolve_config({'interface': CountingInterface, 'timer_slack': value}).timer_slack \
        == (None if value is None else float(value))


@pytest.mark.parametrize('value', [-1e-3, 'short', float('nan'), None], ids=repr)
def test_timer_last_stretch_must_be_a_number_of_seconds(value):
    with pytest.raises((ValueError, TypeError), match=r"config\['timer_last_stretch'\]"):
        resolve_config({'interface': CountingInterface, 'timer_last_stretch': value})


def test_timer_last_stretch_defaults_to_the_deadline_module_s():
    assert resolve_config({'interface': CountingInterface}).timer_last_stretch == LAST_STRETCH
    assert resolve_config({'interface': CountingInterface,
                           'timer_last_stretch': 0}).timer_last_stretch == 0.0


@pytest.mark.parametrize('key, value', [
    ('node_name', None), ('node_name', ''), ('node_name', 5), ('namespace', 5),
    ('namespace', None), ('interface_args', 5), ('interface_args', 'abc'),
    ('interface_kwargs', 'abc'), ('interface_kwargs', [('a', 1)]),
    ('gil_switch_interval', 1e300), ('gil_switch_interval', 2.0), ('ep_max_length', 2.5),
    ('ep_max_length', 0)], ids=repr)
def test_a_value_of_the_wrong_kind_fails_with_the_key(key, value):
    # str(None) named the node '/None'; tuple('abc') gave the interface three arguments.
    with pytest.raises((ValueError, TypeError), match=rf"config\['{key}'\]"):
        resolve_config({'interface': CountingInterface, key: value})


@pytest.mark.parametrize('key, value', [('node_name', 'bad name'), ('node_name', '1st'),
                                        ('namespace', 'a b'), ('namespace', '/r1//x')])
def test_a_name_ros_refuses_fails_with_the_key_before_any_node(key, value):
    names = {'node_name': 'rtgym_env', 'namespace': '', key: value}
    with pytest.raises(ValueError, match=rf"config\['{key}'\] must be a valid ROS .*"
                                         rf'got {value!r}: Invalid'):
        check_node_name(names['node_name'], names['namespace'])
    check_node_name('rtgym_env_2', 'robots/r1')  # a relative namespace goes under /


def test_a_size_past_memory_is_refused_with_the_key():
    memory = validate.physical_memory()
    assert memory is not None and memory > 0
    check_fits_in_memory(memory, key='k', what='values')
    with pytest.raises(ValueError, match=r'^k: values take .* GB, more than the .* GB of memory'):
        check_fits_in_memory(memory + 1, key='k', what='values')


@pytest.mark.parametrize('pages', [-1, 0])
def test_memory_the_os_cannot_tell_refuses_nothing(monkeypatch, pages):
    # sysconf answers -1 for a value it cannot determine: no size is past an unknown memory.
    real = validate.os.sysconf
    monkeypatch.setattr(validate.os, 'sysconf',
                        lambda name: pages if name == 'SC_PHYS_PAGES' else real(name))
    assert validate.physical_memory() is None
    check_fits_in_memory(10**30, key='k', what='values')
