"""The dataset page states the dataset's Table 1 (CVR/CVCR) in the paper's reading and ours."""

import pytest

pytestmark = pytest.mark.django_db


def test_dataset_page_shows_its_table_1_in_both_readings(user_client, built_dataset):
    dataset = built_dataset(4)
    page = user_client.get(dataset.get_absolute_url()).content.decode()
    assert 'id="dataset-table-1"' in page and "CVR 0.00% (0 of 4 gold queries" in page
    assert "Our broader reading" in page
