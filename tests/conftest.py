import pytest

from tests.corpus import CORPUS


@pytest.fixture(scope="session")
def corpus_dir():
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found beside the project")
    return CORPUS
