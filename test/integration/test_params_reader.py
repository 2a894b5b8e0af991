"""
The params reader's child process: rcl's answer comes back, and a reader that hangs is stopped.

rcl reads parameters in a child process with discovery off (rtgym_ros/ros/rcl_parameters.py),
because a DDS participant's teardown can block its process for good. These tests run the real
reader where it can show the property, and small stand-in scripts where the failure to show is
the reader's own (no answer, a hang after the answer, a crash).
"""

import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from ros_probe import CHILD_ENV, wait_until
from rtgym_ros.robot.params_file import load_params_file
from rtgym_ros.ros import forked_reads, parameters
from rtgym_ros.ros.parameters import read_node_parameters

ARGS = ['agent', '--ros-args', '-p', 'gain:=2.5', '-p', 'arm.joints:=[a, b]']


def _reader(tmp_path: Path, body: str) -> Path:
    """
    Write a stand-in for rcl_parameters.py: ``body`` runs with the request in ``request``.

    Its process writes its pid to ``pid`` first (``_reader_pid``).
    """
    script = tmp_path / 'stand_in_reader.py'
    script.write_text(f'import os, pickle, sys, time\n'
                      f'open({str(tmp_path / "pid")!r}, "w").write(str(os.getpid()))\n'
                      f'request = pickle.load(sys.stdin.buffer)\n' + textwrap.dedent(body))
    return script


def _reader_pid(tmp_path: Path) -> int:
    return int((tmp_path / 'pid').read_text())


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (reaped, or a zombie)."""
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except OSError:
        return True
    return stat.rsplit(')', 1)[1].split()[0] == 'Z'


def _answer(values: dict) -> str:
    return (f'sys.stdout.buffer.write(pickle.dumps(("ok", "agent", "/", {values!r})))\n'
            'sys.stdout.buffer.flush()\n')


def test_rcl_answers_through_the_child():
    given = read_node_parameters(ARGS + ['-r', '__ns:=/r1'], default_node_name='agent')
    assert (given.node_name, given.namespace) == ('agent', '/r1')
    assert given.parameters == {'gain': 2.5, 'arm': {'joints': ['a', 'b']}}


def test_the_child_discovers_no_one_whatever_the_callers_discovery_range(monkeypatch, capfd):
    """The caller's range is one rcl warns about; the child's is OFF, so rcl says nothing."""
    monkeypatch.setenv('ROS_AUTOMATIC_DISCOVERY_RANGE', 'NOT_A_RANGE')
    given = read_node_parameters(ARGS, default_node_name='agent')
    assert given.parameters['gain'] == 2.5
    assert 'ROS_AUTOMATIC_DISCOVERY_RANGE' not in capfd.readouterr().err


def test_a_module_in_the_working_directory_does_not_stand_in_for_rclpy(tmp_path, monkeypatch):
    (tmp_path / 'rclpy.py').write_text('raise ImportError("the rclpy.py of the working '
                                       'directory was imported")\n')
    monkeypatch.chdir(tmp_path)
    assert read_node_parameters(ARGS, default_node_name='agent').parameters['gain'] == 2.5


def test_what_rcl_refuses_is_a_value_error_naming_the_source():
    with pytest.raises(ValueError, match=r'^agent --ros-args: rcl refuses it: .*same type'):
        read_node_parameters(['agent', '--ros-args', '-p', 'gains:=[1, 2.5]'],
                             default_node_name='agent', source='agent --ros-args')


def test_a_reader_that_does_not_answer_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, 'time.sleep(600)\n'))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r'^robot_config x.yaml: rcl did not read the '
                                           r'parameters within 1 s'):
        read_node_parameters(ARGS, default_node_name='agent', source='robot_config x.yaml',
                             timeout=1.0)
    assert time.monotonic() - started < 30
    wait_until(lambda: _gone(_reader_pid(tmp_path)), 10.0, 'the reader process to end')


def test_an_answer_stands_when_the_reader_hangs_after_giving_it(tmp_path, monkeypatch):
    """As when a participant's teardown blocks: the answer is out, so it is used."""
    script = _reader(tmp_path, _answer({'gain': 2.5}) + 'time.sleep(600)\n')
    monkeypatch.setattr(parameters, '_READER', script)
    given = read_node_parameters(ARGS, default_node_name='agent', timeout=1.0)
    assert given.parameters == {'gain': 2.5}
    wait_until(lambda: _gone(_reader_pid(tmp_path)), 10.0, 'the reader process to end')


def test_a_reader_that_fails_is_reported_with_its_exit_code_and_stderr(tmp_path, monkeypatch):
    script = _reader(tmp_path, "print('rclpy is not importable here', file=sys.stderr)\n"
                               'sys.exit(3)\n')
    monkeypatch.setattr(parameters, '_READER', script)
    with pytest.raises(RuntimeError, match=r'exited with code 3 and no answer: '
                                           r'rclpy is not importable here'):
        read_node_parameters(ARGS, default_node_name='agent')


def test_a_dds_failure_is_quoted_without_its_terminal_colours():
    # Fast DDS cannot open the ports of domain 999 and logs why, in colour.
    with pytest.raises(parameters.ParametersUnreadable) as error:
        read_node_parameters(ARGS, default_node_name='agent', domain_id=999)
    assert 'domainId' in str(error.value), str(error.value)
    assert '\x1b' not in str(error.value), repr(str(error.value))


def test_the_request_reaches_the_reader_whole(tmp_path, monkeypatch):
    echo = 'sys.stdout.buffer.write(pickle.dumps(("ok", "n", "/ns", {"echo": request})))\n'
    monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, echo))
    given = read_node_parameters([Path('/a'), 'b'], default_node_name='n', namespace='/ns',
                                 source='s', domain_id=7)
    assert given.parameters['echo'] == {'args': ['/a', 'b'], 'default_node_name': 'n',
                                        'namespace': '/ns', 'source': 's', 'domain_id': 7,
                                        'node_args': None, 'name_files': False}


@pytest.mark.parametrize('node, args', [
    ('agent', ['agent', '--ros-args', '-p', 'policy:=zero']),
    ('check', ['check', '--ros-args', '-p', 'time_step_duration:=0.05']),
    ('agent', ['agent', '--ros-args', '-p', 'robot_config:=robot.yaml']),  # read by the env
])
def test_the_nodes_exit_one_with_the_readers_failure_and_no_traceback(
        tmp_path, monkeypatch, capsys, node, args):
    """The agent's own parameters, check's, and a robot config the env reads: all via rcl."""
    from rtgym_ros.nodes import agent, check
    monkeypatch.setattr(agent, '_raise_on_stop_signals', lambda: None)  # pytest's stay
    if args[-1].endswith('robot.yaml'):  # the first read answers; the robot config's fails
        monkeypatch.setattr(parameters, '_READER', _reader(
            tmp_path, 'if "--params-file" in request["args"]:\n    sys.exit(4)\n' +
            _answer({'robot_config': str(tmp_path / 'robot.yaml')})))
        (tmp_path / 'robot.yaml').write_text('rtgym_env:\n  ros__parameters: {}\n')
        args = args[:-1] + [f'robot_config:={tmp_path / "robot.yaml"}']
    else:
        monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, 'sys.exit(4)\n'))
    code = {'agent': agent, 'check': check}[node].main(args)
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.startswith(f'{node}: ') and 'exited with code 4 and no answer' in err
    assert 'Traceback' not in err


PENDULUM = Path(__file__).resolve().parents[2] / 'config' / 'robots' / 'pendulum_sim.yaml'


def _pipe(data: bytes) -> str:
    """Return /dev/fd/N of a pipe holding ``data``, as the shell's ``<(cat F)`` gives it."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return f'/dev/fd/{read}'


def test_a_params_file_in_a_pipe_is_read_once_and_rcl_reads_its_bytes():
    """``--params-file <(cat F)``: the child has not the fd, and a pipe gives its bytes once."""
    expected = load_params_file(PENDULUM, node_name='rtgym_env')
    piped = _pipe(PENDULUM.read_bytes())
    try:
        assert load_params_file(piped, node_name='rtgym_env') == expected  # gym.make's path
    finally:
        os.close(int(piped.rsplit('/', 1)[1]))
    piped = _pipe(PENDULUM.read_bytes())
    try:  # the agent's and check's path: their own command line
        given = read_node_parameters(['agent', '--ros-args', '--params-file', piped],
                                     default_node_name='rtgym_env')
        assert given.parameters == expected
    finally:
        os.close(int(piped.rsplit('/', 1)[1]))


def test_of_several_params_files_the_one_rcl_refuses_is_named(tmp_path):
    """Name the file rcl refused when the command line has more than one, as rcl does."""
    good, bad = tmp_path / 'good.yaml', tmp_path / 'bad.yaml'
    good.write_text('/**:\n  ros__parameters:\n    a: 1\n')
    bad.write_text('/**:\n  ros__parameters:\n    b: [1, 2.5]\n')
    piped = _pipe(bad.read_bytes())  # read through a copy: named as the command line names it
    try:
        for files in ([good, bad], [bad, good], [good, piped]):
            refused = str(files[1] if files[0] == good else files[0])
            with pytest.raises(ValueError, match=rf'^agent --ros-args: rcl refuses it: '
                                                 rf'{re.escape(refused)}: Sequence should'):
                read_node_parameters(['agent', '--ros-args', '--params-file', str(files[0]),
                                      '--params-file', str(files[1])],
                                     default_node_name='agent', source='agent --ros-args')
    finally:
        os.close(int(piped.rsplit('/', 1)[1]))


@pytest.mark.parametrize('args', [['/dev/stdin'], ['--ros-args', '--params-file', '/dev/stdin']])
@pytest.mark.parametrize('stdin', ['pipe', 'file'])
def test_check_reads_a_robot_config_from_stdin(args, stdin):
    """``check /dev/stdin < F`` and ``cat F | check ...``: what a plain rclpy node accepts."""
    with open(PENDULUM, 'rb') as file:
        result = subprocess.run(
            [sys.executable, '-m', 'rtgym_ros.nodes.check', *args], env=CHILD_ENV,
            input=PENDULUM.read_bytes() if stdin == 'pipe' else None,
            stdin=None if stdin == 'pipe' else file, capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()
    assert b'pendulum_joint' in result.stdout


# -- each read a fork of a process that imported rclpy (rtgym_ros/ros/fork_server.py) --------


def test_each_read_is_a_fork_of_one_process_that_imported_rclpy(tmp_path, monkeypatch):
    monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, _answer({}).replace(
        '{}', '{"rclpy": "rclpy" in sys.modules, "parent": os.getppid(), "pid": os.getpid()}')))
    first, second = (read_node_parameters(ARGS + ['-p', f'read:={n}'],
                                          default_node_name='agent').parameters
                     for n in (1, 2))
    assert first['rclpy'] and second['rclpy']  # imported before the reader ran
    assert first['parent'] == second['parent'] != os.getpid()
    assert first['pid'] != second['pid']


def test_a_read_runs_in_the_working_directory_and_environment_it_was_made_in(
        tmp_path, monkeypatch):
    monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, _answer({}).replace(
        '{}', '{"cwd": os.getcwd(), "mark": os.environ.get("RTGYM_ROS_TEST_MARK"), '
              '"range": os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"]}')))
    seen = []
    for mark in ('one', 'two'):
        directory = tmp_path / mark
        directory.mkdir()
        monkeypatch.chdir(directory)
        monkeypatch.setenv('RTGYM_ROS_TEST_MARK', mark)
        seen.append(read_node_parameters(ARGS + ['-p', f'mark:={mark}'],
                                         default_node_name='agent').parameters)
    assert seen == [{'cwd': str(tmp_path / mark), 'mark': mark, 'range': 'OFF'}
                    for mark in ('one', 'two')]


def test_a_relative_params_file_is_read_from_the_working_directory(tmp_path, monkeypatch):
    for value in (1, 2):
        directory = tmp_path / f'd{value}'
        directory.mkdir()
        (directory / 'robot.yaml').write_text(f'/**:\n  ros__parameters:\n    a: {value}\n')
        monkeypatch.chdir(directory)
        assert load_params_file('robot.yaml', node_name='rtgym_env') == {'a': value}


PRELUDE = """
import os, sys, threading, time
from rtgym_ros.ros import forked_reads
from rtgym_ros.ros.parameters import read_node_parameters
ARGS = ['agent', '--ros-args', '-p', 'gain:=2.5']
"""
# A script's first read, and the pid of the server it started.
SCRIPT = PRELUDE + """
assert read_node_parameters(ARGS, default_node_name='agent').parameters == {'gain': 2.5}
server = forked_reads._server.process.pid
"""


def _python(code: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, '-c', code], env=CHILD_ENV, text=True, **popen)


def _run_to_ok(code: str) -> None:
    """Run ``code`` in a fresh interpreter; it must print OK and exit 0."""
    script = _python(code, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = script.communicate(timeout=120)
    assert script.returncode == 0 and out.strip() == 'OK', err[-2000:]


def test_the_server_ends_with_its_process():
    script = _python(SCRIPT + 'print(server, flush=True)\ntime.sleep(600)\n',
                     stdout=subprocess.PIPE)
    try:
        server = int(script.stdout.readline())
        assert not _gone(server)
        script.kill()  # no atexit: the server must see its caller's end by itself
        script.wait(10.0)
        wait_until(lambda: _gone(server), 10.0, 'the fork server to end with its caller')
    finally:
        if script.poll() is None:
            script.kill()
            script.wait(10.0)


def test_a_process_forked_after_a_read_reads_with_a_server_of_its_own():
    """As with multiprocessing's fork: the child's reads must not use its parent's server."""
    _run_to_ok(SCRIPT + textwrap.dedent("""
        pid = os.fork()
        if pid == 0:
            ok = read_node_parameters(ARGS + ['-p', 'x:=1'], default_node_name='agent')
            os._exit(0 if ok.parameters['x'] == 1 and forked_reads._server.process.pid
                     != server else 3)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        again = read_node_parameters(ARGS + ['-p', 'x:=2'], default_node_name='agent')
        assert again.parameters['x'] == 2 and forked_reads._server.process.pid == server
        print('OK')
    """))


def test_the_server_outlives_the_thread_that_started_it():
    """A read from a worker thread (gym.make there) starts the server for the process."""
    _run_to_ok(PRELUDE + textwrap.dedent("""
        worker = threading.Thread(target=read_node_parameters, args=(ARGS,),
                                  kwargs={'default_node_name': 'agent'})
        worker.start()
        worker.join()
        server = forked_reads._server.process.pid
        read_node_parameters(ARGS + ['-p', 'x:=1'], default_node_name='agent')
        assert forked_reads._server is not None and forked_reads._server.process.pid == server
        assert forked_reads._server.process.poll() is None
        print('OK')
    """))


def _reaped(pid: int) -> bool:
    """Whether process ``pid`` is gone for good: ended and waited for (no zombie left)."""
    return not Path(f'/proc/{pid}').exists()


def test_an_idle_server_is_closed_and_the_next_read_starts_another(monkeypatch):
    forked_reads._close_server()  # a server of an earlier test watches with its own time
    monkeypatch.setattr(forked_reads, 'IDLE_CLOSE', 0.5)
    before = set(threading.enumerate())
    assert read_node_parameters(ARGS, default_node_name='agent').parameters['gain'] == 2.5
    server = forked_reads._server.process.pid
    watch, = set(threading.enumerate()) - before
    wait_until(lambda: _reaped(server), 10.0, 'the idle fork server to be closed and reaped')
    assert forked_reads._server is None and not forked_reads._unavailable
    watch.join(5.0)
    assert not watch.is_alive()
    assert read_node_parameters(ARGS + ['-p', 'x:=1'],
                                default_node_name='agent').parameters['x'] == 1
    assert forked_reads._server.process.pid != server


def test_a_read_longer_than_the_idle_time_is_not_cut(tmp_path, monkeypatch):
    forked_reads._close_server()
    monkeypatch.setattr(forked_reads, 'IDLE_CLOSE', 0.3)
    read_node_parameters(ARGS, default_node_name='agent')  # a server, its idle time counting
    monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, 'time.sleep(1.5)\n' + _answer(
        {}).replace('{}', '{"forked": "rclpy" in sys.modules}')))
    assert read_node_parameters(ARGS, default_node_name='agent').parameters == {'forked': True}
    assert not forked_reads._unavailable


def _ctrl_c(*_: object) -> None:
    """Raise what a Ctrl-C raises (SIGINT itself may be ignored: a run in the background)."""
    raise KeyboardInterrupt


def test_a_ctrl_c_during_a_read_stops_its_process_and_the_next_read_answers(
        tmp_path, monkeypatch):
    monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, 'time.sleep(600)\n'))
    previous = signal.signal(signal.SIGALRM, _ctrl_c)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            read_node_parameters(ARGS, default_node_name='agent', timeout=60.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    wait_until(lambda: _gone(_reader_pid(tmp_path)), 10.0, 'the interrupted reader to end')
    answering = tmp_path / 'answering'
    answering.mkdir()
    monkeypatch.setattr(parameters, '_READER', _reader(answering, _answer({'b': 1})))
    assert read_node_parameters(ARGS, default_node_name='agent').parameters == {'b': 1}


def test_reads_go_on_in_fresh_interpreters_where_the_server_cannot_run(tmp_path, monkeypatch):
    monkeypatch.setattr(forked_reads, '_server', None)
    monkeypatch.setattr(forked_reads, '_unavailable', False)
    server = tmp_path / 'fork_server.py'
    server.write_text('raise SystemExit(2)\n')  # a server that ends before it is ready
    monkeypatch.setattr(forked_reads, '_SERVER', server)
    monkeypatch.setattr(parameters, '_READER', _reader(tmp_path, _answer({}).replace(
        '{}', '{"rclpy": "rclpy" in sys.modules}')))
    for n in (1, 2):
        given = read_node_parameters(ARGS + ['-p', f'n:={n}'], default_node_name='agent')
        assert given.parameters == {'rclpy': False}  # a fresh interpreter each
    assert forked_reads._unavailable and forked_reads._server is None


def test_the_server_forks_through_lttngs_hooks_where_rclpy_loaded_lttng():
    """Importing rclpy starts LTTng-UST's listener threads: a bare fork could copy a held lock."""
    script = _python(textwrap.dedent("""
        import os, rclpy
        from rtgym_ros.ros import fork_server
        threads = len(os.listdir('/proc/self/task'))
        print(threads, fork_server._fork_hooks() is not None)
    """), stdout=subprocess.PIPE)
    threads, hooks = script.communicate(timeout=60)[0].split()
    assert int(threads) == 1 or hooks == 'True'
