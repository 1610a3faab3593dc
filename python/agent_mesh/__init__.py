"""agent-mesh for Python: wire-compatible with the TypeScript package (docs/protocol.md)."""

from .base58 import decode as base58_decode, encode as base58_encode
from .did import (
    Identity,
    IdentityFileError,
    InvalidDid,
    KeyRevoked,
    MalformedDidDocument,
    did_hash,
    extract_public_key,
    generate_did,
    identity_from_key,
    import_identity,
    load_identity_file,
    make_did_document,
    normalize_did,
    parse_did,
    save_identity_file,
    verification_method_id,
)
from .jcs import NotCanonicalizable, StrictJsonError, canonical_bytes, canonicalize, parse_json_strict
from .keys import (
    MalformedKey,
    did_key,
    generate_private_key,
    import_public_key,
    load_private_key,
    private_key_seed,
    private_key_to_pkcs8,
    public_key_b64,
    public_key_bytes,
    public_key_multibase,
    public_key_of_did_key,
    sign,
    verify,
)

__version__ = "1.0.0"
