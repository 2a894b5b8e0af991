from ament_flake8.main import main_with_errors
from linted_paths import LINTED
import pytest


@pytest.mark.flake8
@pytest.mark.linter
def test_flake8():
    rc, errors = main_with_errors(argv=LINTED)
    assert rc == 0, f'found {len(errors)} code style errors / warnings:\n' + '\n'.join(errors)
