"""The ``s3`` RemoteStorageManager: remote storage in an S3 bucket, through boto3.

Config (``rsm.config.`` prefix removed): ``s3.bucket`` (required), ``s3.prefix`` (prepended to
every key, default empty), ``s3.region``, ``s3.endpoint.url`` (for S3-protocol servers other than
AWS), ``s3.multipart.threshold.bytes`` (files at least this big go up in a multipart upload,
default 8 MiB; S3's minimum part is 5 MiB), ``s3.retry.max.attempts`` (default 10). Credentials
come from boto3's usual chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
profiles, instance roles).

Keys are ``<s3.prefix>`` + ``api.object_name``. S3 PUTs are atomic per object, so a copy that dies
leaves whole objects or none; a multipart upload that dies leaves no object (only parts, which a
bucket lifecycle rule aborts). Every request is retried by botocore's "standard" mode (5xx,
throttling, connection errors) before a RemoteStorageError reaches the caller. Deleting a missing
key is a no-op in S3, which makes delete idempotent. Thread-safe: one boto3 client, which boto3
documents as safe to share between threads.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from kavka.tiered.api import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    check_range,
    object_name,
)

_MIB = 1 << 20
_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}


class S3RemoteStorageManager:
    def __init__(self) -> None:
        self._client: Any = None
        self._bucket = ""
        self._prefix = ""
        self._transfer: Any = None

    def configure(self, configs: Mapping[str, str]) -> None:
        try:
            import boto3
            from boto3.s3.transfer import TransferConfig
            from botocore.config import Config
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ValueError("the s3 remote storage manager needs boto3: "
                             "pip install 'kavka[s3]'") from e
        bucket = configs.get("s3.bucket")
        if not bucket:
            raise ValueError("rsm.config.s3.bucket is required for the s3 remote storage manager")
        self._bucket = bucket
        self._prefix = configs.get("s3.prefix", "")
        threshold = int(configs.get("s3.multipart.threshold.bytes", str(8 * _MIB)))
        if threshold < 5 * _MIB:
            raise ValueError("rsm.config.s3.multipart.threshold.bytes must be at least 5 MiB "
                             "(S3's smallest multipart part)")
        attempts = int(configs.get("s3.retry.max.attempts", "10"))
        self._transfer = TransferConfig(multipart_threshold=threshold,
                                        multipart_chunksize=threshold, use_threads=False)
        self._client = boto3.client(
            "s3",
            region_name=configs.get("s3.region") or None,
            endpoint_url=configs.get("s3.endpoint.url") or None,
            config=Config(retries={"max_attempts": attempts, "mode": "standard"}),
        )

    def _key(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType | None) -> str:
        return self._prefix + object_name(metadata.segment_id, index_type)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> None:
        from botocore.exceptions import BotoCoreError, ClientError
        try:
            for index_type, src in data.files().items():
                key = self._key(metadata, index_type)
                if isinstance(src, bytes):
                    self._client.put_object(Bucket=self._bucket, Key=key, Body=src)
                else:
                    self._client.upload_file(str(src), self._bucket, key,
                                             Config=self._transfer)
        except (BotoCoreError, ClientError, OSError) as e:
            raise RemoteStorageError(f"copy of {metadata.segment_id}: {e}") from e

    def _get(self, key: str, byte_range: str | None) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError
        kwargs: dict[str, str] = {"Bucket": self._bucket, "Key": key}
        if byte_range is not None:
            kwargs["Range"] = byte_range
        try:
            resp = self._client.get_object(**kwargs)
            buf = io.BytesIO()
            for chunk in resp["Body"].iter_chunks(_MIB):
                buf.write(chunk)
            return buf.getvalue()
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in _NOT_FOUND:
                raise RemoteResourceNotFoundError(key) from e
            if code == "InvalidRange":  # start past the end: nothing there, as a file read
                return b""
            raise RemoteStorageError(f"get {key}: {e}") from e
        except BotoCoreError as e:
            raise RemoteStorageError(f"get {key}: {e}") from e

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        check_range(start_position, end_position)
        end = "" if end_position is None else str(end_position)
        return self._get(self._key(metadata, None), f"bytes={start_position}-{end}")

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self._get(self._key(metadata, index_type), None)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        from botocore.exceptions import BotoCoreError, ClientError
        keys = [{"Key": self._key(metadata, t)} for t in [None, *IndexType]]
        try:
            resp = self._client.delete_objects(Bucket=self._bucket,
                                               Delete={"Objects": keys, "Quiet": True})
        except (BotoCoreError, ClientError) as e:
            raise RemoteStorageError(f"delete of {metadata.segment_id}: {e}") from e
        errors = resp.get("Errors") or []
        if errors:
            raise RemoteStorageError(f"delete of {metadata.segment_id}: {errors}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
