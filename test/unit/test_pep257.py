from ament_pep257.main import main
from linted_paths import LINTED
import pytest


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257():
    rc = main(argv=LINTED)
    assert rc == 0, 'found docstring style errors (printed above)'
