"""The uploader's one-line messages for what moto cannot show (it accepts any credentials): a
403, refused credentials, no credentials, an unreachable endpoint, as botocore raises them."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from jupyter_tiers.data.s3_upload import _explain

REQ = {"bucket": "team-ckpt", "endpoint_url": "https://s3.lab.example", "mode": "kernel"}


def client_error(code: str, status: int, op: str = "HeadBucket") -> ClientError:
    response = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, op)  # type: ignore[arg-type]  # botocore has no stubs here


@pytest.mark.parametrize("exc, says", [
    (client_error("403", 403), "access to bucket team-ckpt denied: the credentials (kernel) lack access"),
    (client_error("AccessDenied", 403, "UploadPart"), "access to bucket team-ckpt denied"),
    (client_error("InvalidAccessKeyId", 403, "PutObject"),
     "https://s3.lab.example refused the credentials (kernel): InvalidAccessKeyId"),
    (client_error("SignatureDoesNotMatch", 403, "PutObject"), "refused the credentials"),
    (client_error("404", 404), "bucket team-ckpt does not exist at https://s3.lab.example"),
    (client_error("NoSuchBucket", 404, "PutObject"), "bucket team-ckpt does not exist"),
    (NoCredentialsError(), "no AWS credentials on "),
    (EndpointConnectionError(endpoint_url="https://s3.lab.example"),
     "cannot reach https://s3.lab.example from "),
])
def test_each_failure_is_one_line_naming_the_bucket_or_endpoint(exc: Exception, says: str) -> None:
    message = _explain(exc, REQ)
    assert says in message and "\n" not in message
