"""Parameter counts and other numbers as researchers type them (issue 15)."""

from __future__ import annotations

import pytest

from advisor.quantities import QuantityError, in_units, parse_parameter_count, parse_quantity


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("8B", 8_000_000_000),
        ("7b", 7_000_000_000),
        ("125M", 125_000_000),
        ("1.3e9", 1_300_000_000),
        ("1,300,000,000", 1_300_000_000),
        ("1 300 000 000", 1_300_000_000),
        ("0.11", 110_000_000),  # a plain small number is billions
        ("7", 7_000_000_000),
        ("124439808", 124_439_808),
        (" 70B params ", 70_000_000_000),
        ("1.5T", 1_500_000_000_000),
    ],
)
def test_parameter_counts_in_the_forms_model_names_use(text, count):
    assert parse_parameter_count(text) == count


@pytest.mark.parametrize("text", ["", "seven", "8 bn", "1,30,0", "nan", "inf", "-3B", "0", "1e999"])
def test_what_is_not_a_count_is_refused_with_a_message_naming_the_forms(text):
    with pytest.raises(QuantityError) as info:
        parse_parameter_count(text)
    assert str(info.value)


def test_a_suffix_says_the_number_is_absolute():
    assert parse_quantity("125M") == (125e6, True)
    assert parse_quantity("50") == (50.0, False)


def test_values_are_converted_to_the_questions_unit():
    # The size question asks for billions (scale 1e9, at most 2,000).
    assert in_units(*parse_quantity("125M"), scale=1e9, maximum=2000) == pytest.approx(0.125)
    assert in_units(*parse_quantity("1,300,000,000"), scale=1e9, maximum=2000) == 1.3
    assert in_units(*parse_quantity("7"), scale=1e9, maximum=2000) == 7
    # A unit of one: nothing to convert, even with a suffix.
    assert in_units(*parse_quantity("2k"), scale=1, maximum=None) == 2000
