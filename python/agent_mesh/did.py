"""``did:mesh`` identifiers, their W3C DID documents (Multikey ``z6Mk…``), ``didHash``, identities and identity files
(docs/protocol.md §3, §8)."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
from typing import Any, TypedDict

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .jcs import StrictJsonError, parse_json_strict
from .keys import (
    MalformedKey,
    PrivateKeyInput,
    b64encode,
    decode_public_key_multibase,
    did_key,
    generate_private_key,
    import_public_key,
    is_acceptable_public_key,
    load_private_key,
    private_key_to_pkcs8,
    public_key_bytes,
    public_key_multibase,
    public_key_of_did_key,
    sha256,
)

__all__ = [
    "DID_PATTERN",
    "DID_MAX_LENGTH",
    "DID_CONTEXT",
    "InvalidDid",
    "KeyRevoked",
    "MalformedDidDocument",
    "IdentityFileError",
    "Identity",
    "normalize_did",
    "parse_did",
    "is_normalized_did",
    "verification_method_id",
    "did_of_verification_method",
    "did_hash",
    "make_did_document",
    "extract_public_key",
    "identity_from_key",
    "generate_did",
    "import_identity",
    "identity_file_content",
    "save_identity_file",
    "load_identity_file",
    "public_key_multibase",
    "decode_public_key_multibase",
    "did_key",
    "public_key_of_did_key",
]

# ASCII: under IGNORECASE alone, [a-z] would also match U+017F and U+212A, which JavaScript's /i does not.
DID_PATTERN = re.compile(r"did:mesh:[a-z0-9][a-z0-9:._-]+", re.IGNORECASE | re.ASCII)
DID_MAX_LENGTH = 256
DID_CONTEXT = ("https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1")


class InvalidDid(ValueError):
    """Input that is not a ``did:mesh`` DID (``INVALID_DID``)."""

    code = "INVALID_DID"


class KeyRevoked(ValueError):
    """The DID document's key is marked revoked (``KEY_REVOKED``)."""

    code = "KEY_REVOKED"

    def __init__(self, message: str, verification_method: str, revoked: str) -> None:
        super().__init__(message)
        self.verification_method = verification_method
        self.revoked = revoked


class MalformedDidDocument(ValueError):
    """Not a DID document with an Ed25519 Multikey we can read (``MALFORMED_DID_DOCUMENT``)."""

    code = "MALFORMED_DID_DOCUMENT"


class IdentityFileError(ValueError):
    """An identity file that cannot be written (``FILE_EXISTS``, ``IO_ERROR``) or read (``IDENTITY_INVALID``)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class Identity(dict):  # type: ignore[type-arg]
    """The spec's identity object: ``did``, ``private_key``, ``public_key``, ``public_key_bytes``, ``document``, and
    the derived forms the TypeScript identity carries (``did_hash``, ``did_key``, ``public_key_b64``). Each is an
    attribute (``me.did``) and, as before, a key (``me["did"]``), so code written against the dict form keeps working."""

    @property
    def did(self) -> str:
        return self["did"]  # type: ignore[no-any-return]

    @property
    def private_key(self) -> Ed25519PrivateKey:
        return self["private_key"]  # type: ignore[no-any-return]

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self["public_key"]  # type: ignore[no-any-return]

    @property
    def public_key_bytes(self) -> bytes:
        return self["public_key_bytes"]  # type: ignore[no-any-return]

    @property
    def document(self) -> dict[str, Any]:
        return self["document"]  # type: ignore[no-any-return]

    @property
    def did_hash(self) -> str:
        return self["did_hash"]  # type: ignore[no-any-return]

    @property
    def did_key(self) -> str:
        return self["did_key"]  # type: ignore[no-any-return]

    @property
    def public_key_b64(self) -> str:
        return self["public_key_b64"]  # type: ignore[no-any-return]


def normalize_did(value: Any) -> str | None:
    """The normalized (lower-case) DID, or None when the input is not a ``did:mesh`` DID."""
    if isinstance(value, str) and len(value) <= DID_MAX_LENGTH and DID_PATTERN.fullmatch(value):
        return value.lower()
    return None


def parse_did(value: Any) -> str:
    """Normalizes and checks a DID; ``InvalidDid`` otherwise."""
    did = normalize_did(value)
    if did is None:
        raise InvalidDid(
            f"{json.dumps(value) if isinstance(value, str) else repr(value)} is not a did:mesh DID "
            f"(did:mesh:<name> or did:mesh:<namespace>.<name>, at most {DID_MAX_LENGTH} characters)"
        )
    return did


def is_normalized_did(value: Any) -> bool:
    """True when the input is already a normalized (lower-case) DID."""
    return isinstance(value, str) and normalize_did(value) == value


def verification_method_id(did: str) -> str:
    """``<did>#key-1``: the verification method every mesh identity signs with."""
    return f"{did}#key-1"


def did_of_verification_method(vm: str) -> str:
    """The DID part of a verification method id."""
    return vm.split("#", 1)[0]


def did_hash(did: str) -> str:
    """``didHash``: the first 15 bytes of SHA-256 over the normalized DID, as lower-case unpadded base32 (24 chars)."""
    d = parse_did(did)
    return base64.b32encode(sha256(d.encode("utf-8"))[:15]).decode("ascii").lower()


def make_did_document(did: str, public_key: bytes, service_endpoint: str | None = None) -> dict[str, Any]:
    """The DID document for a DID, its raw public key and (optionally) the endpoint where it is served."""
    vm = verification_method_id(did)
    doc: dict[str, Any] = {
        "@context": list(DID_CONTEXT),
        "id": did,
        "verificationMethod": [
            {"id": vm, "type": "Multikey", "controller": did, "publicKeyMultibase": public_key_multibase(public_key)}
        ],
        "authentication": [vm],
        "assertionMethod": [vm],
    }
    if service_endpoint is not None:
        doc["service"] = [{"id": f"{did}#mesh", "type": "MeshAgent", "serviceEndpoint": service_endpoint}]
    return doc


def _check_document(doc: Any) -> None:
    def need(cond: bool, what: str) -> None:
        if not cond:
            raise MalformedDidDocument(f"not a DID document: {what}")

    need(isinstance(doc, dict), "not an object")
    ctx = doc.get("@context")
    need(isinstance(ctx, list) and all(isinstance(c, str) for c in ctx), "@context must be an array of strings")
    need(isinstance(doc.get("id"), str), "id must be a string")
    vms = doc.get("verificationMethod")
    need(isinstance(vms, list) and len(vms) > 0, "verificationMethod must be a non-empty array")
    for m in vms:
        need(isinstance(m, dict), "a verification method is not an object")
        for k in ("id", "type", "controller", "publicKeyMultibase"):
            need(isinstance(m.get(k), str), f"verification method {k} must be a string")
        need("revoked" not in m or isinstance(m["revoked"], str), "revoked must be a string")
    for k in ("authentication", "assertionMethod"):
        if k in doc:
            need(
                isinstance(doc[k], list) and all(isinstance(x, str) for x in doc[k]), f"{k} must be an array of strings"
            )
    if "service" in doc:
        svc = doc["service"]
        need(isinstance(svc, list), "service must be an array")
        for s in svc:
            need(
                isinstance(s, dict) and all(isinstance(s.get(k), str) for k in ("id", "type", "serviceEndpoint")),
                "a service entry needs id, type and serviceEndpoint strings",
            )


def extract_public_key(document: Any, method_id: str | None = None) -> bytes:
    """The raw public key of a DID document's method (default ``<id>#key-1``). Raises ``KeyRevoked`` on a revoked
    key, ``MalformedDidDocument`` on an unreadable one, ``MalformedKey`` (``INVALID_PUBLIC_KEY``) on a small-order or
    non-canonical one; all are ``ValueError``."""
    _check_document(document)
    wanted = method_id if method_id is not None else verification_method_id(document["id"])
    vm = next((m for m in document["verificationMethod"] if m["id"] == wanted), None)
    if vm is None:
        raise MalformedDidDocument(f"no verification method {wanted}")
    if vm["type"] != "Multikey":
        raise MalformedDidDocument(f"method type {vm['type']} is not Multikey")
    if "revoked" in vm:
        raise KeyRevoked(f"key {vm['id']} was revoked at {vm['revoked']}", vm["id"], vm["revoked"])
    key = decode_public_key_multibase(vm["publicKeyMultibase"])
    if key is None:
        raise MalformedDidDocument("publicKeyMultibase is not an Ed25519 Multikey")
    if not is_acceptable_public_key(key):
        raise MalformedKey("public key is a small-order point or not canonically encoded", "INVALID_PUBLIC_KEY")
    return key


def identity_from_key(did: str, private_key: PrivateKeyInput, base_address: str | None = None) -> Identity:
    """The identity for a DID and an existing key (any accepted form)."""
    d = parse_did(did)
    key = load_private_key(private_key)
    pub = public_key_bytes(key)
    return Identity({
        "did": d,
        "private_key": key,
        "public_key": key.public_key(),
        "public_key_bytes": pub,
        "document": make_did_document(d, pub, base_address),
        "did_hash": did_hash(d),
        "did_key": did_key(pub),
        "public_key_b64": b64encode(pub),
    })


def generate_did(name: str, base_address: str | None = None, namespace: str | None = None) -> Identity:
    """A new identity ``did:mesh:[<namespace>.]<name>`` with a fresh key; ``base_address`` becomes the service
    endpoint of its document. ``InvalidDid`` when the result is not a DID."""
    did = parse_did(f"did:mesh:{'' if namespace is None else namespace + '.'}{name}")
    return identity_from_key(did, generate_private_key(), base_address)


def import_identity(did: str, private_key: PrivateKeyInput, base_address: str | None = None) -> Identity:
    """An identity from a DID and a key given as a seed, PKCS#8, base64 of either, or a key object."""
    return identity_from_key(did, private_key, base_address)


def identity_file_content(identity: Identity) -> dict[str, Any]:
    """The identity file's members, as ``mesh keygen`` writes them."""
    pub = public_key_bytes(identity["private_key"])
    return {
        "did": identity["did"],
        "didHash": did_hash(identity["did"]),
        "publicKeyB64": b64encode(pub),
        "privateKeyPkcs8B64": b64encode(private_key_to_pkcs8(identity["private_key"])),
        "didKey": did_key(pub),
        "document": identity["document"],
    }


def save_identity_file(identity: Identity, path: str | os.PathLike[str], force: bool = False) -> str:
    """Writes an identity file with mode 0600, created exclusively: ``FILE_EXISTS`` if anything is at the path (a
    dangling symbolic link included) unless ``force``, which writes a new file beside it and renames it over the
    path, so a link there is replaced, never followed. Returns the absolute path."""
    file = os.path.abspath(os.fspath(path))
    text = json.dumps(identity_file_content(identity), indent=2, ensure_ascii=False) + "\n"
    data = text.encode("utf-8")

    def write_exclusive(target: str) -> None:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.fchmod(fd, 0o600)  # the umask may have narrowed the mode
            os.write(fd, data)
        finally:
            os.close(fd)

    if not force:
        try:
            write_exclusive(file)
        except FileExistsError as e:
            raise IdentityFileError(
                f"{file} exists (a file, directory or link, even a dangling one); pass force=True to replace it",
                "FILE_EXISTS",
            ) from e
        except OSError as e:
            raise IdentityFileError(str(e), "IO_ERROR") from e
        return file
    tmp = os.path.join(os.path.dirname(file), f".{os.path.basename(file)}.{secrets.token_hex(8)}.tmp")
    try:
        write_exclusive(tmp)
        os.replace(tmp, file)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise IdentityFileError(str(e), "IO_ERROR") from e
    return file


def load_identity_file(path: str | os.PathLike[str]) -> Identity:
    """Reads an identity file: I-JSON, every member present, one key throughout (docs/protocol.md §8).
    ``IdentityFileError`` (``IDENTITY_INVALID``, ``IO_ERROR``) or ``MalformedKey`` (``INVALID_PUBLIC_KEY``)."""
    file = os.fspath(path)

    def invalid(message: str) -> IdentityFileError:
        return IdentityFileError(f"identity {file}: {message}", "IDENTITY_INVALID")

    try:
        with open(file, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise IdentityFileError(f"cannot read identity {file}: {e}", "IO_ERROR") from e
    try:
        content = parse_json_strict(raw)
    except StrictJsonError as e:
        raise invalid(str(e)) from e
    if not isinstance(content, dict):
        raise invalid("not a JSON object")
    for k in ("did", "didHash", "publicKeyB64", "privateKeyPkcs8B64", "didKey"):
        if not isinstance(content.get(k), str):
            raise invalid(f"{k} must be a string")
    if "document" not in content:
        raise invalid("document is missing")
    did = content["did"]
    if not is_normalized_did(did):
        raise invalid(f"{json.dumps(did)} is not a lower-case did:mesh DID")
    pub = import_public_key(content["publicKeyB64"])
    try:
        from_document = extract_public_key(content["document"], verification_method_id(did))
    except (MalformedDidDocument, KeyRevoked) as e:
        raise invalid(str(e)) from e
    from_did_key = public_key_of_did_key(content["didKey"])
    key = load_private_key(content["privateKeyPkcs8B64"])
    own = public_key_bytes(key)
    for what, found in (("publicKeyB64", pub), ("document", from_document), ("didKey", from_did_key)):
        if found != own:
            raise invalid(f"the {what} key is not the private key's")
    doc = content["document"]
    return Identity({
        "did": did,
        "private_key": key,
        "public_key": key.public_key(),
        "public_key_bytes": own,
        "document": doc,
        "did_hash": did_hash(did),
        "did_key": content["didKey"],
        "public_key_b64": b64encode(own),
    })
