"""Schemas where kio's generated type cannot carry a value Kafka puts on the wire, re-declared
with the plain wire type: `WIDENED[(api_key, version, kind)]` -> the entity class
(`protocol.api.request_schema` / `response_schema` consult it first). The bytes are identical;
only the Python type differs.

- DescribeTransactionsResponse v0, TransactionStartTimeMs: kio types it `datetime_i64` and its
  reader refuses a negative value, but Kafka answers -1 for a transactional id with no
  transaction running (Empty, Complete*). Here it is an int64 of milliseconds.
"""

from __future__ import annotations

from kavka.protocol.widened_schema import describe_transactions_v0_response

WIDENED: dict[tuple[int, int, str], type] = {
    (65, 0, "response"): describe_transactions_v0_response.DescribeTransactionsResponse,
}
