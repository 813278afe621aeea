import pytest

from advisor.templatetags.hub_format import bytes_short, count_short


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "unknown"),
        (950, "950"),
        (124439808, "124 M"),
        (1235814400, "1.24 B"),
        (7241732096, "7.24 B"),
        (1_000_000_000_000, "1 T"),
    ],
)
def test_count_short(value, shown):
    assert count_short(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "unknown"), (512, "512 bytes"), (548090880, "548 MB"), (14483464192, "14.5 GB")],
)
def test_bytes_short(value, shown):
    assert bytes_short(value) == shown
