"""The answers kept of the params reads made before: what a key holds, and how many are kept."""

from pathlib import Path

from rtgym_ros.ros.kept_answers import KeptAnswers

READER = Path(__file__)  # any file stands in for the reader: its bytes are in the key


def _request(*args: str, node: str = 'rtgym_env', source: str = 'robot_config F') -> dict:
    return {'args': ['train.py', '--ros-args', *args], 'default_node_name': node,
            'namespace': '', 'source': source, 'domain_id': None, 'node_args': None,
            'name_files': False}


def test_the_oldest_answer_goes_first():
    kept = KeptAnswers(size=2)
    for name in (b'a', b'b', b'c'):
        kept.keep(name, b'out ' + name, b'')
    assert kept.get(b'a') is None
    assert kept.get(b'b') == (b'out b', b'') and kept.get(b'c') == (b'out c', b'')


def test_a_key_holds_the_files_bytes_and_the_node_not_the_source(tmp_path):
    first, second = tmp_path / 'first.yaml', tmp_path / 'second.yaml'
    first.write_text('a: 1')
    second.write_text('a: 1')
    key = KeptAnswers.key(READER, _request('--params-file', str(first)))
    assert key == KeptAnswers.key(READER, _request('--params-file', str(second), source='x'))
    assert key != KeptAnswers.key(READER, _request('--params-file', str(first), node='other'))
    assert key != KeptAnswers.key(READER, _request('--params-file', str(first), '-p', 'a:=2'))
    another_reader = tmp_path / 'reader.py'
    another_reader.write_text('# another reader\n')
    assert key != KeptAnswers.key(another_reader, _request('--params-file', str(first)))
    second.write_text('a: 2')
    assert key != KeptAnswers.key(READER, _request('--params-file', str(second)))


def test_a_file_that_cannot_be_read_has_no_key(tmp_path):
    assert KeptAnswers.key(READER, _request('--params-file', str(tmp_path / 'none.yaml'))) \
        is None
    assert KeptAnswers.key(tmp_path / 'no_reader.py', _request()) is None
    assert KeptAnswers().get(None) is None
