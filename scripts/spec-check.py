#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Independent implementation of the Baton wire protocol v1, written from docs/protocol.md
alone (not from the Swift sources), checked against Tests/BatonCoreTests/Vectors/protocol-v1.json.

Prints one line per check and a final line `N passed, M failed`; exits non-zero on any failure.
Needs Python 3 and python3-cryptography (AES-GCM, X25519)."""
import hashlib
import itertools
import hmac
import json
import math
import re
import pathlib
import struct
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.exceptions import InvalidTag

ROOT = pathlib.Path(__file__).resolve().parent.parent
VECTORS = ROOT / "Tests/BatonCoreTests/Vectors/protocol-v1.json"


class ProtocolError(Exception):
    """An error class of the spec, e.g. ProtocolError("malformed", "length") is malformed(length)."""

    def __init__(self, kind, detail=None):
        super().__init__(kind if detail is None else f"{kind}({detail})")
        self.kind, self.detail = kind, detail


def u16be(x): return struct.pack(">H", x)
def u32be(x): return struct.pack(">I", x)
def u64be(x): return struct.pack(">Q", x)


# §1, §3: HKDF (RFC 5869) and HMAC with SHA-256.
def hmac_sha256(key, message):
    return hmac.new(key, message, hashlib.sha256).digest()


def hkdf(ikm, salt, info, length):
    prk = hmac_sha256(salt, ikm)
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac_sha256(prk, block + info + bytes([counter]))
        out += block
        counter += 1
    return out[:length]


SALT = b"baton/v1"


EPOCHS_PER_DAY = 96
CHAIN_DAYS = 1024


def ratchet_step(key, day):
    """§3.1: S_d from S_(d-1), labelled with the day d it yields."""
    return hashlib.sha256(b"baton/v1 ratchet" + u64be(day) + key).digest()


def ratchet(key, from_day, to_day):
    assert to_day >= from_day
    for day in range(from_day + 1, to_day + 1):
        key = ratchet_step(key, day)
    return key


def chain_end(key, day, commitment):
    """§3.1: the day F (day < F <= day + 1024) whose S_F is the commitment, or None."""
    for step in range(1, CHAIN_DAYS + 1):
        key = ratchet_step(key, day + step)
        if key == commitment:
            return day + step
    return None


class Keys:
    """§3 key schedule for the key S_d of one day and its generation's commitment C."""

    def __init__(self, secret, commitment=None):
        assert len(secret) == 32
        self.secret = secret
        self.tag = hkdf(secret, SALT, b"baton/v1 tag", 32)
        # K_type comes from the commitment; the checks that only seal and open never use it.
        self.type = hkdf(commitment, SALT, b"baton/v1 type", 32) if commitment is not None else None
        self.mdns = hkdf(secret, SALT, b"baton/v1 mdns", 32)

    def seal(self, epoch):
        """K_seal_e: one AES-128-GCM key per epoch."""
        return hkdf(self.secret, SALT, b"baton/v1 seal" + u64be(epoch), 16)

    def epoch_value(self, epoch):
        return hmac_sha256(self.tag, b"baton/v1 epoch" + u64be(epoch))

    def advert_tag(self, epoch): return self.epoch_value(epoch)[0:6]
    def mask(self, epoch): return self.epoch_value(epoch)[6]

    def type_hash(self, activity_type):
        return hmac_sha256(self.type, b"baton/v1 type" + activity_type.encode("utf-8"))[0:4]

    def mdns_instance(self, epoch):
        return hmac_sha256(self.mdns, b"baton/v1 mdns" + u64be(epoch))[0:8].hex()


# §4 ring advert.
RING_HEADER = 0x11
FLAG_HAS_ACTIVITY, FLAG_WEBPAGE, FLAG_DOCUMENT, FLAG_PREFERS_BLE = 1, 2, 4, 8
# §4.1: bits 4-5 are the kind of the clipboard copy offered (§6.7); bits 6-7 are reserved and ignored.
CLIPBOARD_KINDS = {0: None, 1: "text", 2: "image", 3: "files"}


def advert_flags(flags):
    """§4.1 flags as a receiver reads them: bits 0-3 by name, bits 4-5 the clipboard kind, bits 6-7 ignored."""
    return {"hasActivity": bool(flags & FLAG_HAS_ACTIVITY), "hasWebpageURL": bool(flags & FLAG_WEBPAGE),
            "hasDocument": bool(flags & FLAG_DOCUMENT), "prefersBLE": bool(flags & FLAG_PREFERS_BLE),
            "clipboard": CLIPBOARD_KINDS[(flags >> 4) & 3]}


def advert_nonce(epoch, seq):
    return u64be(epoch) + b"\x00\x00\x00" + bytes([seq])


def seal_ring_advert(keys, epoch, seq, type_hash, revision, flags):
    assert 0 <= seq < 256 and 0 <= revision < 1 << 24 and len(type_hash) == 4
    head = bytes([RING_HEADER]) + keys.advert_tag(epoch) + bytes([seq ^ keys.mask(epoch)])
    body = type_hash + revision.to_bytes(3, "big") + bytes([flags])
    sealed = AESGCM(keys.seal(epoch)).encrypt(advert_nonce(epoch, seq), body, head)
    return head + sealed[:8] + sealed[8:16]  # ciphertext (8) || first 8 bytes of the tag


def open_with(key, nonce, aad, ciphertext, tag8):
    decryptor = Cipher(algorithms.AES(key), modes.GCM(nonce, tag8, min_tag_length=8)).decryptor()
    decryptor.authenticate_additional_data(aad)
    return decryptor.update(ciphertext) + decryptor.finalize()


def check_header(advert):
    if len(advert) != 24:
        raise ProtocolError("malformed", "length")
    if advert[0] >> 4 != 1:
        raise ProtocolError("unsupportedVersion")
    if advert[0] & 0x0F not in (1, 2):
        raise ProtocolError("unknownKind")


def masked_body(body):
    """§4.3 step 6: bodies are compared with the reserved flag bits 6-7 set to 0 (bits 4-5, the clipboard, count)."""
    return bytes(body[0:7]) + bytes([body[7] & 0x3F]) if len(body) == 8 else bytes(body)


class Receiver:
    """§4.3: a table tag → [(member, epoch, mask, generation, keys)] and per-member replay state."""

    def __init__(self, ring, clock_epoch):
        # ring: {member: (S_d, generation)} with d the day of clock_epoch - 1, the stored day (§3.1)
        self.table = {}
        stored_day = (clock_epoch - 1) // EPOCHS_PER_DAY
        for member, (secret, generation) in ring.items():
            for epoch in (clock_epoch - 1, clock_epoch, clock_epoch + 1):
                keys = Keys(ratchet(secret, stored_day, epoch // EPOCHS_PER_DAY))
                entry = (member, epoch, keys.mask(epoch), generation, keys)
                self.table.setdefault(keys.advert_tag(epoch), []).append(entry)
        self.state = {}  # member → (E, Q, R, G, body)

    def open(self, advert):
        """Steps 1–5; returns (member, epoch, seq, generation, body fields)."""
        check_header(advert)
        if advert[0] & 0x0F != 1:
            raise ProtocolError("unknownKind")  # a pairing advert goes to §5, not here
        entries = self.table.get(bytes(advert[1:7]))
        if not entries:
            raise ProtocolError("notRingMember")
        for member, epoch, mask, generation, keys in entries:
            seq = advert[7] ^ mask
            try:
                body = open_with(keys.seal(epoch), advert_nonce(epoch, seq), advert[0:8], advert[8:16], advert[16:24])
            except InvalidTag:
                continue
            type_hash, revision, flags = body[0:4], int.from_bytes(body[4:7], "big"), body[7]
            if not flags & FLAG_HAS_ACTIVITY and (type_hash != bytes(4) or flags & (FLAG_WEBPAGE | FLAG_DOCUMENT)):
                raise ProtocolError("malformed", "body")
            return member, epoch, seq, generation, body, (type_hash, revision, flags)
        raise ProtocolError("authenticationFailed")

    def receive(self, advert):
        """Steps 1–6; returns the outcome newRevision or sameRevision, or raises."""
        member, epoch, seq, generation, body, (_, revision, _) = self.open(advert)
        previous = self.state.get(member)
        if previous is not None:
            last_epoch, last_seq, last_revision, last_generation, last_body = previous
            if generation == last_generation:
                if epoch < last_epoch:
                    raise ProtocolError("staleEpoch")
                if epoch == last_epoch and seq < last_seq:
                    raise ProtocolError("replayedSequence")
                # Bodies are compared with the reserved flag bits 6-7 cleared (§4.3 step 6).
                if epoch == last_epoch and seq == last_seq and masked_body(body) != masked_body(last_body):
                    raise ProtocolError("conflictingSequence")
            if 1 <= (last_revision - revision) % (1 << 24) < 1 << 23:
                raise ProtocolError("staleRevision")
        self.state[member] = (epoch, seq, revision, generation, body)
        return "newRevision" if previous is None or previous[2] != revision else "sameRevision"


# §5 pairing advert.
PAIRING_HEADER = 0x12


def encode_pairing_advert(session_id, tcp_published, psm, name):
    flags = (1 if tcp_published else 0) | (2 if psm else 0)
    raw = name.encode("utf-8")
    while len(raw) > 12:  # cut at a character boundary: drop whole code points from the end
        name = name[:-1]
        raw = name.encode("utf-8")
    return bytes([PAIRING_HEADER]) + session_id + bytes([flags]) + u16be(psm or 0) + raw.ljust(12, b"\x00")


def decode_pairing_advert(advert):
    check_header(advert)
    if advert[0] & 0x0F != 2:
        raise ProtocolError("unknownKind")
    session_id, flags, psm, name_field = advert[1:9], advert[9], int.from_bytes(advert[10:12], "big"), advert[12:24]
    # §5: the name is checked before the PSM.
    name_bytes = name_field.rstrip(b"\x00")
    if b"\x00" in name_bytes:
        raise ProtocolError("malformed", "name")
    try:
        name = name_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("malformed", "name") from None
    l2cap = bool(flags & 2)
    if l2cap != (psm != 0) or (psm != 0 and not 0x80 <= psm <= 0xFF):
        raise ProtocolError("malformed", "psm")
    return session_id, bool(flags & 1), psm or None, name


# §6.4 property values.
class Date(float):
    """A date value: seconds since 1970 (distinct from a double)."""


MAX_DEPTH = 16
MAX_USER_INFO = 65536


class Reader:
    def __init__(self, data):
        self.data, self.at = bytes(data), 0

    def remaining(self): return len(self.data) - self.at

    def take(self, n):
        if n > self.remaining():
            raise ProtocolError("truncated")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def u8(self): return self.take(1)[0]
    def u16(self): return int.from_bytes(self.take(2), "big")
    def u32(self): return int.from_bytes(self.take(4), "big")
    def u64(self): return int.from_bytes(self.take(8), "big")

    def finish(self):
        if self.remaining():
            raise ProtocolError("trailingBytes")


def read_utf8(reader, what):
    length = reader.u32()
    try:
        return reader.take(length).decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("malformed", f"{what} not UTF-8") from None


def read_value(reader, depth=1):
    if depth > MAX_DEPTH:
        raise ProtocolError("tooDeep")
    kind = reader.u8()
    if kind == 0x01:
        return read_utf8(reader, "string")
    if kind == 0x02:
        return int.from_bytes(reader.take(8), "big", signed=True)
    if kind in (0x03, 0x07):
        number = struct.unpack(">d", reader.take(8))[0]
        if math.isnan(number):
            raise ProtocolError("malformed", "NaN")
        if kind == 0x07 and math.isinf(number):
            raise ProtocolError("malformed", "date not finite")
        return number if kind == 0x03 else Date(number)
    if kind == 0x04:
        return False
    if kind == 0x05:
        return True
    if kind == 0x06:
        return reader.take(reader.u32())
    if kind == 0x08:
        count = reader.u32()
        if count > reader.remaining():  # every value takes at least one byte
            raise ProtocolError("truncated")
        return [read_value(reader, depth + 1) for _ in range(count)]
    if kind == 0x09:
        count = reader.u32()
        if count > reader.remaining() // 5:  # every entry takes at least 4 + 1 bytes
            raise ProtocolError("truncated")
        result, last_key = {}, None
        for _ in range(count):
            key = read_utf8(reader, "key")
            key_bytes = key.encode("utf-8")
            if last_key is not None and not last_key < key_bytes:
                raise ProtocolError("malformed", "dictionary keys not strictly ascending")
            last_key = key_bytes
            result[key] = read_value(reader, depth + 1)
        return result
    raise ProtocolError("malformed", f"value type {kind}")


def decode_value(data):
    reader = Reader(data)
    value = read_value(reader)
    reader.finish()
    return value


def encode_value(value, depth=1):
    if depth > MAX_DEPTH:
        raise ProtocolError("tooDeep")
    if isinstance(value, bool):
        return b"\x05" if value else b"\x04"
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return b"\x01" + u32be(len(raw)) + raw
    if isinstance(value, int):
        return b"\x02" + value.to_bytes(8, "big", signed=True)
    if isinstance(value, float):
        if math.isnan(value):
            raise ProtocolError("malformed", "NaN")
        if isinstance(value, Date) and math.isinf(value):
            raise ProtocolError("malformed", "date not finite")
        return (b"\x07" if isinstance(value, Date) else b"\x03") + struct.pack(">d", value)
    if isinstance(value, (bytes, bytearray)):
        return b"\x06" + u32be(len(value)) + bytes(value)
    if isinstance(value, list):
        return b"\x08" + u32be(len(value)) + b"".join(encode_value(v, depth + 1) for v in value)
    if isinstance(value, dict):
        entries = sorted((k.encode("utf-8"), v) for k, v in value.items())
        return b"\x09" + u32be(len(entries)) + b"".join(
            u32be(len(k)) + k + encode_value(v, depth + 1) for k, v in entries)
    raise TypeError(value)


# §6.4 activity value.
ACTIVITY_KEYS = {"revision": int, "title": str, "type": str, "userInfo": dict, "version": int, "webpageURL": str}
TYPE_CHARACTERS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")


def validate_activity(value):
    if not isinstance(value, dict):
        raise ProtocolError("malformed", "activity not a dictionary")
    required = set(ACTIVITY_KEYS) - {"webpageURL"}
    if not required <= value.keys() or not value.keys() <= ACTIVITY_KEYS.keys():
        raise ProtocolError("malformed", "activity keys")
    for key, kind in ACTIVITY_KEYS.items():
        if key in value and (not isinstance(value[key], kind) or isinstance(value[key], bool)):
            raise ProtocolError("malformed", f"activity {key}")
    if len(value["title"].encode()) > 256:
        raise ProtocolError("malformed", "title")
    activity_type = value["type"]
    if not 1 <= len(activity_type) <= 128 or not set(activity_type) <= TYPE_CHARACTERS:
        raise ProtocolError("malformed", "activity type")
    labels = activity_type.split(".")
    if len(labels) < 2 or "" in labels:
        raise ProtocolError("malformed", "activity type labels")
    if len(encode_value(value["userInfo"])) > MAX_USER_INFO:
        raise ProtocolError("payloadTooLarge")
    if value["version"] < 0:
        raise ProtocolError("malformed", "version")
    url = value.get("webpageURL")
    if url is not None and (len(url.encode()) > 2048 or not url.lower().startswith(("http://", "https://"))):
        raise ProtocolError("malformed", "webpageURL")
    return value


# §6.1–6.3 frames.
FRAME_LIMITS = {0x01: 28, 0x02: 8, 0x03: 262144, 0x04: 8, 0x05: 0, 0x06: 4 + 256,
                0x07: 48, 0x08: 8 + 32 + 2 * (1 + 255), 0x09: 8 + 65536, 0x0A: 1 + 255 + 8, 0x0B: 8 + 32, 0x0C: 8 + 1 + 16 * 16,
                0x0D: 0, 0x0E: 8 + 1 + 2 + (1 + 64) + 1 + 16 * (1 + 255 + 8), 0x0F: 8 + (1 + 255) + 8, 0x11: 16 + 65536,
                0x12: 8 + 2 + 32 + 8,
                0x10: 1048576,
                0x20: 41, 0x21: 48, 0x22: 48, 0x23: 8 + 4096 + 16}
ERROR_CODES = {1: "malformed", 2: "unsupportedVersion", 3: "payloadTooLarge", 4: "unknownActivity",
               5: "notPermitted", 6: "timedOut", 7: "internal", 8: "sessionBusy", 9: "documentConflict",
               10: "versionUnsupported", 11: "fileChanged"}


def encode_frame(frame_type, request_id, payload):
    if len(payload) > FRAME_LIMITS[frame_type]:
        raise ProtocolError("payloadTooLarge")
    return bytes([1, frame_type, 0, 0]) + u32be(request_id) + u32be(len(payload)) + payload


def decode_frame(data):
    """One whole frame from `data`; returns (type, request id, payload, decoded payload)."""
    reader = Reader(data)
    version, frame_type, reserved, request_id, length = reader.u8(), reader.u8(), reader.u16(), reader.u32(), reader.u32()
    if version != 1:
        raise ProtocolError("unsupportedVersion")
    if frame_type not in FRAME_LIMITS:
        raise ProtocolError("unknownType")
    if reserved:
        raise ProtocolError("malformed", "reserved")
    if length > FRAME_LIMITS[frame_type]:
        raise ProtocolError("payloadTooLarge")
    payload = reader.take(length)
    reader.finish()
    return frame_type, request_id, payload, decode_payload(frame_type, payload)


# §6.7 the clipboard: texts, offers, data.
CLIPBOARD_MAX_ITEM = 67108864  # 64 MiB
CLIPBOARD_MAX_CHUNK = 65536
OFFER_KINDS = {1: "text", 2: "image", 3: "files"}


def read_media_type(reader):
    """§6.7: 1-255 bytes, each printable ASCII 0x21-0x7E: a length of 0 is `media type length`, any other
    byte `media type characters`."""
    raw = reader.take(reader.u8())
    if not raw:
        raise ProtocolError("malformed", "media type length")
    if any(not 0x21 <= b <= 0x7E for b in raw):
        raise ProtocolError("malformed", "media type characters")
    return raw.decode("ascii")


def read_account(reader):
    """§6.7: 1-64 bytes of UTF-8, no control character (U+0000-U+001F, U+007F), no '/' and no ':'.
    The length is checked before its bytes are read, then UTF-8, then the characters (§6.7)."""
    length = reader.u8()
    if not 1 <= length <= 64:
        raise ProtocolError("malformed", "account length")
    raw = reader.take(length)
    try:
        account = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("malformed", "account not UTF-8") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c in "/:" for c in account):
        raise ProtocolError("malformed", "account characters")
    return account


def decode_clipboard_offer(reader):
    fields = {"offerId": reader.take(8)}
    kind = reader.u8()
    if kind not in OFFER_KINDS:
        raise ProtocolError("malformed", "kind")
    fields["kind"] = OFFER_KINDS[kind]
    fields["expiresIn"] = reader.u16()
    if not 1 <= fields["expiresIn"] <= 3600:
        raise ProtocolError("malformed", "expiry")
    fields["account"] = read_account(reader)
    count = reader.u8()
    if not 1 <= count <= 16:  # checked before any item is read
        raise ProtocolError("malformed", "item count")
    fields["items"] = []
    for _ in range(count):
        media_type = read_media_type(reader)
        size = reader.u64()
        if size > CLIPBOARD_MAX_ITEM:
            raise ProtocolError("malformed", "item size")
        if any(media_type == m for m, _ in fields["items"]):
            raise ProtocolError("malformed", "media type repeated")
        fields["items"].append([media_type, size])
    return fields


def decode_clipboard_data(reader):
    """§6.7 ClipboardData alone (no offer, no request): total <= 64 MiB, bytes not past the total,
    empty only at the total. Checked in that order (§6.7 gives none)."""
    fields = {"offset": reader.u64(), "total": reader.u64(), "data": reader.take(reader.remaining())}
    if fields["total"] > CLIPBOARD_MAX_ITEM:
        raise ProtocolError("malformed", "item size")
    if fields["offset"] + len(fields["data"]) > fields["total"]:
        raise ProtocolError("malformed", "data beyond the item")
    if not fields["data"] and fields["offset"] != fields["total"]:
        raise ProtocolError("malformed", "empty data")
    return fields


# §6.7 "Files": the list of a files offer (its one item) and FetchClipboardFile.
FILE_LIST_TYPE = "application/x-baton-file-list"


def decode_file_list(data):
    """§6.7 "Files": u16be count (1-256, checked before any file), then per file: name (u8 length 1-255, UTF-8,
    no control character, no '/', not '.' or '..'), size (u64be; the sizes' sum fits 64 bits), media type."""
    reader = Reader(data)
    count = reader.u16()
    if not 1 <= count <= 256:
        raise ProtocolError("malformed", "file count")
    files, total = [], 0
    for _ in range(count):
        length = reader.u8()
        if length == 0:
            raise ProtocolError("malformed", "file name length")
        raw = reader.take(length)
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("malformed", "file name not UTF-8") from None
        if any(ord(c) < 0x20 or ord(c) == 0x7F or c == "/" for c in name) or name in (".", ".."):
            raise ProtocolError("malformed", "file name characters")
        size = reader.u64()
        total += size
        if total >= 1 << 64:
            raise ProtocolError("malformed", "file sizes")
        files.append([name, size, read_media_type(reader)])
    reader.finish()
    return files


def encode_file_list(files):
    out = u16be(len(files))
    for name, size, media_type in files:
        raw = name.encode("utf-8")
        out += bytes([len(raw)]) + raw + u64be(size) + bytes([len(media_type)]) + media_type.encode("ascii")
    return out


class ClipboardPull:
    """§6.7 receiver of the answer to one FetchClipboardData(offer id, media type, offset), for an offer it
    took: the first frame at the asked offset, each next at the end of the one before, total = the offered
    size, the last ending at the total, an empty frame only at the total. Returns the bytes when whole."""

    def __init__(self, offer, media_type, offset):
        sizes = dict((m, s) for m, s in offer["items"])
        self.size, self.next, self.data, self.done = sizes[media_type], offset, b"", False

    def take(self, fields):
        if self.done or fields["offset"] != self.next:
            raise ProtocolError("malformed", "data out of order")
        if fields["total"] != self.size:
            raise ProtocolError("malformed", "total is not the offered size")
        self.data += fields["data"]
        self.next += len(fields["data"])
        self.done = self.next == self.size
        return self.done


def decode_payload(frame_type, payload):
    reader = Reader(payload)
    if frame_type == 0x01:
        fields = {"deviceId": reader.take(16), "ringVersion": reader.u64(), "maxPayload": reader.u32()}
    elif frame_type in (0x02, 0x04):
        fields = {"typeHash": reader.take(4), "revision": reader.u32()}
        if fields["revision"] >= 1 << 24 and fields["revision"] != 0xFFFFFFFF:
            raise ProtocolError("malformed", "revision")
    elif frame_type == 0x03:
        fields = validate_activity(read_value(reader))
    elif frame_type == 0x05:
        fields = {}
    elif frame_type == 0x06:
        code = reader.u16()
        fields = {"code": ERROR_CODES.get(code, code), "message": reader.take(reader.u16()).decode("utf-8")}
    elif frame_type == 0x07:  # §6.5 FetchDocument
        fields = {"typeHash": reader.take(4), "revision": reader.u32(), "digest": reader.take(32), "offset": reader.u64()}
        if fields["revision"] >= 1 << 24 and fields["revision"] != 0xFFFFFFFF:
            raise ProtocolError("malformed", "revision")
        if fields["digest"] == bytes(32) and fields["offset"] != 0:
            raise ProtocolError("malformed", "an offset needs the snapshot's digest")
    elif frame_type == 0x08:  # §6.5 DocumentInfo
        fields = {"totalSize": reader.u64(), "digest": reader.take(32)}
        for key in ("mediaType", "documentId"):
            text = reader.take(reader.u8())
            try:
                fields[key] = text.decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolError("malformed", "text not UTF-8")
        for key in ("mediaType", "documentId"):
            if not fields[key] or any(ord(c) < 0x20 or ord(c) == 0x7F for c in fields[key]):
                raise ProtocolError("malformed", key)
    elif frame_type == 0x09:  # §6.5 DocumentChunk
        fields = {"offset": reader.u64(), "data": reader.take(reader.remaining())}
        if not fields["data"]:
            raise ProtocolError("malformed", "empty chunk")
    elif frame_type == 0x0A:  # §6.6 ClaimEditSession
        text = reader.take(reader.u8())
        try:
            fields = {"documentId": text.decode("utf-8")}
        except UnicodeDecodeError:
            raise ProtocolError("malformed", "text not UTF-8")
        fields["baseRevision"] = reader.u64()
        if not fields["documentId"]:
            raise ProtocolError("malformed", "document id length")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in fields["documentId"]):
            raise ProtocolError("malformed", "document id has control characters")
    elif frame_type == 0x0B:  # §6.6 EditSessionGrant
        fields = {"revision": reader.u64(), "digest": reader.take(32)}
        if fields["revision"] == 0:
            raise ProtocolError("malformed", "revision 0")
    elif frame_type == 0x0C:  # §6.2 FetchActivityOfVersions
        fields = {"typeHash": reader.take(4), "revision": reader.u32()}
        if fields["revision"] >= 1 << 24 and fields["revision"] != 0xFFFFFFFF:
            raise ProtocolError("malformed", "revision")
        count = reader.u8()
        if not 1 <= count <= 16:
            raise ProtocolError("malformed", "range count")
        fields["versions"] = []
        for _ in range(count):
            lowest, highest = reader.u64(), reader.u64()
            if lowest > highest:
                raise ProtocolError("malformed", "range")
            fields["versions"].append([lowest, highest])
    elif frame_type == 0x0D:  # §6.7 FetchClipboardOffer: empty (the limit 0 already holds it)
        fields = {}
    elif frame_type == 0x0E:  # §6.7 ClipboardOffer
        fields = decode_clipboard_offer(reader)
    elif frame_type == 0x0F:  # §6.7 FetchClipboardData
        fields = {"offerId": reader.take(8), "mediaType": read_media_type(reader), "offset": reader.u64()}
        if fields["offset"] > CLIPBOARD_MAX_ITEM:
            raise ProtocolError("malformed", "offset")
    elif frame_type == 0x11:  # §6.7 ClipboardData
        fields = decode_clipboard_data(reader)
    elif frame_type == 0x12:  # §6.7 FetchClipboardFile
        fields = {"offerId": reader.take(8), "index": reader.u16()}
        if fields["index"] >= 256:
            raise ProtocolError("malformed", "file index")
        fields["digest"], fields["offset"] = reader.take(32), reader.u64()
        if fields["digest"] == bytes(32) and fields["offset"] != 0:
            raise ProtocolError("malformed", "an offset needs the file's digest")
    elif frame_type == 0x10:
        fields = decode_roster_value(read_value(reader))
    elif frame_type == 0x20:
        fields = {"version": reader.u8(), "sessionId": reader.take(8), "commitment": reader.take(32)}
    elif frame_type in (0x21, 0x22):
        fields = {"publicKey": reader.take(32), "nonce": reader.take(16)}
    else:  # 0x23
        fields = {"counter": reader.u64(), "sealed": reader.take(reader.remaining())}
    reader.finish()
    return fields


def encode_payload(frame_type, fields):
    if frame_type == 0x01:
        return fields["deviceId"] + u64be(fields["ringVersion"]) + u32be(fields["maxPayload"])
    if frame_type in (0x02, 0x04):
        return fields["typeHash"] + u32be(fields["revision"])
    if frame_type == 0x03:
        return encode_value(fields)
    if frame_type == 0x05:
        return b""
    if frame_type == 0x07:
        return fields["typeHash"] + u32be(fields["revision"]) + fields["digest"] + u64be(fields["offset"])
    if frame_type == 0x08:
        texts = [fields[k].encode("utf-8") for k in ("mediaType", "documentId")]
        return u64be(fields["totalSize"]) + fields["digest"] + b"".join(bytes([len(t)]) + t for t in texts)
    if frame_type == 0x09:
        return u64be(fields["offset"]) + fields["data"]
    if frame_type == 0x0A:
        text = fields["documentId"].encode("utf-8")
        return bytes([len(text)]) + text + u64be(fields["baseRevision"])
    if frame_type == 0x0B:
        return u64be(fields["revision"]) + fields["digest"]
    if frame_type == 0x0C:
        ranges = b"".join(u64be(lowest) + u64be(highest) for lowest, highest in fields["versions"])
        return fields["typeHash"] + u32be(fields["revision"]) + bytes([len(fields["versions"])]) + ranges
    if frame_type == 0x0D:
        return b""
    if frame_type == 0x0E:
        kind = {v: k for k, v in OFFER_KINDS.items()}[fields["kind"]]
        account = fields["account"].encode("utf-8")
        items = b"".join(bytes([len(m)]) + m.encode("ascii") + u64be(size) for m, size in fields["items"])
        return (fields["offerId"] + bytes([kind]) + u16be(fields["expiresIn"]) + bytes([len(account)]) + account
                + bytes([len(fields["items"])]) + items)
    if frame_type == 0x0F:
        media_type = fields["mediaType"].encode("ascii")
        return fields["offerId"] + bytes([len(media_type)]) + media_type + u64be(fields["offset"])
    if frame_type == 0x11:
        return u64be(fields["offset"]) + u64be(fields["total"]) + fields["data"]
    if frame_type == 0x12:
        return fields["offerId"] + u16be(fields["index"]) + fields["digest"] + u64be(fields["offset"])
    if frame_type == 0x06:
        code = {v: k for k, v in ERROR_CODES.items()}.get(fields["code"], fields["code"])
        message = fields["message"].encode("utf-8")
        return u16be(code) + u16be(len(message)) + message
    raise NotImplementedError(frame_type)


# §7.1–7.2 pairing.
def commitment(pk_i, n_i):
    return hashlib.sha256(b"baton/v1 commit" + pk_i + n_i).digest()


def transcript_hash(session_id, commit, pk_i, n_i, pk_r, n_r):
    return hashlib.sha256(b"baton/v1 pair" + session_id + commit + pk_i + n_i + pk_r + n_r).digest()


def sas(h):
    return f"{int.from_bytes(h[0:4], 'big') % 1000000:06d}"


def second_code(h):
    # §7.1 "What the users do": the code the initiator shows once its user typed the SAS.
    return f"{int.from_bytes(h[4:8], 'big') % 1000000:06d}"


def x25519(private, peer_public):
    try:
        z = X25519PrivateKey.from_private_bytes(private).exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError:  # libcrypto itself refuses an all-zero result
        raise ProtocolError("weakKey") from None
    if z == bytes(32):
        raise ProtocolError("weakKey")
    return z


def pairing_keys(z, h):
    k = hkdf(z, h, b"baton/v1 pair keys", 64)
    return k[0:32], k[32:64]


def seal_pairing_message(key, h, counter, message):
    plaintext = encode_value(message)
    if len(plaintext) > 4096:
        raise ProtocolError("payloadTooLarge")
    return u64be(counter) + AESGCM(key).encrypt(bytes(4) + u64be(counter), plaintext, b"baton/v1 sealed" + h)


def open_pairing_message(key, h, expected_counter, payload):
    reader = Reader(payload)
    counter = reader.u64()
    if counter != expected_counter:
        raise ProtocolError("replayedSequence")
    try:
        plaintext = AESGCM(key).decrypt(bytes(4) + u64be(counter), reader.take(reader.remaining()), b"baton/v1 sealed" + h)
    except InvalidTag:
        raise ProtocolError("authenticationFailed") from None
    return decode_value(plaintext)


# §7.3 roster.
def device_id_of(identity_key):
    return hashlib.sha256(identity_key).digest()[0:16]


def decode_roster_value(value):
    # Unknown keys are ignored (§2.1); the listed ones must be there with their types.
    if not isinstance(value, dict) or not {"version", "members", "removed"} <= set(value):
        raise ProtocolError("malformed", "roster")
    if not isinstance(value["members"], list) or not isinstance(value["removed"], list):
        raise ProtocolError("malformed", "roster")
    if not isinstance(value["version"], int) or value["version"] < 0:
        raise ProtocolError("malformed", "roster")
    member_shape = {"deviceId": (bytes, 16), "name": (str, None), "identityKey": (bytes, 32),
                    "secret": (bytes, 32), "generation": (int, None), "signature": (bytes, 64),
                    "day": (int, None), "commitment": (bytes, 32)}
    for member in value["members"]:
        if not isinstance(member, dict) or not set(member_shape) <= set(member):
            raise ProtocolError("malformed", "roster member")
        for key, (kind, size) in member_shape.items():
            if not isinstance(member[key], kind) or isinstance(member[key], bool) or (size and len(member[key]) != size):
                raise ProtocolError("malformed", f"roster {key}")
        # Generation 2^32-1 is refused: its successor would wrap.
        if len(member["name"].encode()) > 64 or not 0 <= member["generation"] < (1 << 32) - 1 or not 0 <= member["day"] < 1 << 32:
            raise ProtocolError("malformed", "roster member")
        # "introducedBy" and "introduction" come together or not at all.
        if ("introducedBy" in member) != ("introduction" in member):
            raise ProtocolError("malformed", "roster member")
        if "introducedBy" in member and not (isinstance(member["introducedBy"], bytes) and len(member["introducedBy"]) == 16
                                             and isinstance(member["introduction"], bytes) and len(member["introduction"]) == 64):
            raise ProtocolError("malformed", "roster member")
        if device_id_of(member["identityKey"]) != member["deviceId"]:
            raise ProtocolError("malformed", "roster member id")
        signed = member_signed_bytes(member["name"], member["identityKey"], member["commitment"], member["generation"])
        if not ed25519_verifies(member["identityKey"], member["signature"], signed):
            raise ProtocolError("badSignature")
        # The unsigned key of "day" must lead to the signed commitment (§3.1, §7.3).
        if chain_end(member["secret"], member["day"], member["commitment"]) is None:
            raise ProtocolError("badSignature")
        if "introductions" in member:
            listed = introduction_records(member["introductions"])
            # Both forms naming one introducer must carry the same signature (§7.3).
            if "introducedBy" in member and listed.get(member["introducedBy"], member["introduction"]) != member["introduction"]:
                raise ProtocolError("malformed", "roster introductions")
    if len(value["members"]) > 10000 or len(value["removed"]) > 10000:
        raise ProtocolError("malformed", "roster size")
    seen = set()
    for mark in value["removed"]:
        removed_id = tombstone(mark)[0]
        if removed_id in seen:
            raise ProtocolError("malformed", "roster removed entry")
        seen.add(removed_id)
    return value


def introduction_records(raw):
    """§7.3 `introductions`: records introducedBy (16) || introduction (64), one per introducer."""
    if not isinstance(raw, bytes) or len(raw) % 80:
        raise ProtocolError("malformed", "roster introductions")
    records = {}
    for offset in range(0, len(raw), 80):
        introducer, signature = raw[offset:offset + 16], raw[offset + 16:offset + 80]
        if introducer in records:
            raise ProtocolError("malformed", "roster introductions")
        records[introducer] = signature
    return records


def introductions_of(member):
    """Both forms of §7.3, their union: one per introducer, the lower signature bytes when two differ."""
    pairs = list(introduction_records(member["introductions"]).items()) if "introductions" in member else []
    if "introducedBy" in member:
        pairs.append((member["introducedBy"], member["introduction"]))
    return union_introductions({}, {}, pairs)


def union_introductions(a, b, pairs=()):
    result = {}
    for introducer, signature in list(a.items()) + list(b.items()) + list(pairs):
        if introducer not in result or signature < result[introducer]:
            result[introducer] = signature
    return result


def tombstone(mark):
    """A removal mark (§7.3) as (removed device id, {removedBy, signature, key or None, introductions})."""
    if isinstance(mark, bytes):
        # Plain: 112 + 80·n bytes; cascading: the flag byte 0x01 after the signature, 113 + 80·n.
        cascading = len(mark) >= 113 and (len(mark) - 113) % 80 == 0
        if len(mark) < 112 or ((len(mark) - 112) % 80 and not cascading) or (cascading and mark[112] != 1):
            raise ProtocolError("malformed", "roster removed entry")
        key = mark[0:32]
        start = 113 if cascading else 112
        return device_id_of(key), {"removedBy": mark[32:48], "signature": mark[48:112], "key": key,
                                   "introductions": introduction_records(mark[start:]), "cascading": cascading}
    shape = {"deviceId": 16, "removedBy": 16, "signature": 64}
    if not isinstance(mark, dict) or not all(isinstance(mark.get(k), bytes) and len(mark[k]) == n for k, n in shape.items()):
        raise ProtocolError("malformed", "roster removed entry")
    return mark["deviceId"], {"removedBy": mark["removedBy"], "signature": mark["signature"], "key": None, "introductions": {},
                              "cascading": False}


def roster_state(value):
    """A decoded roster (§7.3) as members and tombstones by device id."""
    decode_roster_value(value)
    members = {m["deviceId"]: dict(m, introductions=introductions_of(m)) for m in value["members"]}
    for m in members.values():
        m.pop("introducedBy", None), m.pop("introduction", None)
    return {"version": value["version"], "members": members, "removed": dict(tombstone(t) for t in value["removed"])}


def roster_state_value(state):
    """The roster as a sender encodes it (§7.3): members ascending by device id, one introduction as
    introducedBy/introduction and several as introductions; tombstones ascending by removed device id, as
    bytes when they keep a key."""
    members = []
    for device_id in sorted(state["members"]):
        m = state["members"][device_id]
        entry = {k: m[k] for k in ("deviceId", "name", "identityKey", "secret", "generation", "day", "commitment", "signature")}
        intros = sorted(m["introductions"].items())
        if len(intros) == 1:
            entry["introducedBy"], entry["introduction"] = intros[0]
        elif intros:
            entry["introductions"] = b"".join(i + sig for i, sig in intros)
        members.append(entry)
    removed = []
    for device_id in sorted(state["removed"]):
        t = state["removed"][device_id]
        if t["key"] is None:
            removed.append({"deviceId": device_id, "removedBy": t["removedBy"], "signature": t["signature"]})
        else:
            removed.append(t["key"] + t["removedBy"] + t["signature"] + (b"\x01" if t["cascading"] else b"")
                           + b"".join(i + sig for i, sig in sorted(t["introductions"].items())))
    return {"version": state["version"], "members": members, "removed": removed}


def roster_digest(state):
    """§7.3 step 7."""
    data = b"baton/v1 roster" + u32be(len(state["members"]))
    for device_id in sorted(state["members"]):
        data += device_id + state["members"][device_id]["signature"]
    data += u32be(len(state["removed"]))
    for device_id in sorted(state["removed"]):
        t = state["removed"][device_id]
        data += device_id + t["removedBy"] + t["signature"] + bytes([(0 if t["key"] is None else 1) | (2 if t["cascading"] else 0)])
    return hashlib.sha256(data).digest()


def merge_rosters(local, received, me, anchor=None):
    """§7.3's merge, steps 1 to 7, as the text gives them. Returns (new state, newly removed ids)."""
    # 1. Ever-members V with their keys.
    vouched = {i: m["identityKey"] for i, m in local["members"].items()}
    vouched.update({i: t["key"] for i, t in local["removed"].items() if t["key"] is not None})
    if anchor is not None and anchor != me and anchor not in vouched and anchor in received["members"]:
        vouched[anchor] = received["members"][anchor]["identityKey"]
    pending = {}
    for i, m in received["members"].items():
        if i not in vouched:
            pending[i] = (m["identityKey"], m["introductions"])
    for i, t in received["removed"].items():
        if i not in vouched and t["key"] is not None:
            pending[i] = (t["key"], union_introductions(pending.get(i, (None, {}))[1], t["introductions"]))
    grew = True
    while grew:
        grew = False
        for i, (key, intros) in list(pending.items()):
            if any(by in vouched and ed25519_verifies(vouched[by], sig, introduction_signed_bytes(key)) for by, sig in intros.items()):
                vouched[i] = key
                del pending[i]
                grew = True

    # 2. Introductions: each checked, for members already held too.
    def verified(intros, device_id, held):
        key = vouched.get(device_id)
        if key is None:
            return {}
        return {by: sig for by, sig in intros.items()
                if held.get(by) == sig or (by in vouched and ed25519_verifies(vouched[by], sig, introduction_signed_bytes(key)))}

    # 3. Members.
    members = {i: dict(m) for i, m in local["members"].items()}
    for i, m in received["members"].items():
        if i not in vouched:
            continue
        held = members[i]["introductions"] if i in members else local["removed"].get(i, {"introductions": {}})["introductions"]
        intros = verified(m["introductions"], i, held)
        if i in members:
            mine = members[i]
            kept = mine if i == me else preferred_entry(mine, m)
            members[i] = dict(kept, introductions=union_introductions(mine["introductions"], intros))
        else:
            members[i] = dict(m, introductions=intros)

    # 4. Tombstones.
    removed = {i: dict(t) for i, t in local["removed"].items()}
    newly = set()
    for i, mark in received["removed"].items():
        by = mark["removedBy"]
        if by == i or not (i in vouched or i in local["removed"]) or by not in vouched:
            continue  # left out
        held = local["removed"].get(i)
        same = held is not None and (held["removedBy"], held["signature"], held["cascading"]) == (by, mark["signature"], mark["cascading"])
        if not same and not (device_id_of(vouched[by]) == by
                             and ed25519_verifies(vouched[by], mark["signature"], removal_signed_bytes(i, mark["cascading"]))):
            raise ProtocolError("badSignature")
        intros = verified(mark["introductions"], i, held["introductions"] if held else {})
        # A cascading mark before a plain one, then the lower removedBy, then the lower signature.
        order = lambda t: (not t["cascading"], t["removedBy"], t["signature"])
        if held is not None:
            kept = held if same or order(held) < order(mark) else \
                {"removedBy": by, "signature": mark["signature"], "key": mark["key"] if mark["cascading"] else held["key"],
                 "introductions": held["introductions"],
                 "cascading": mark["cascading"]}
        else:
            kept = {"removedBy": by, "signature": mark["signature"], "key": mark["key"] if mark["cascading"] else None,
                    "introductions": {}, "cascading": mark["cascading"]}
            newly.add(i)
        key = kept["key"] if kept["key"] is not None else vouched.get(i)
        removed[i] = dict(kept, key=key, introductions=union_introductions(kept["introductions"], intros) if key is not None else {})
    # 5. Removal wins.
    for i in list(removed):
        if i in members:
            m = members.pop(i)
            t = removed[i]
            key = t["key"] if t["key"] is not None else m["identityKey"]
            removed[i] = dict(t, key=key, introductions=union_introductions(t["introductions"], m["introductions"]))
    # 5a. Cascade: entries a cascading mark takes out are no longer members (no tombstone each);
    # those not out before count as newly removed.
    before = cascade(local["members"], local["removed"]) | set(local["removed"])
    newly |= cascade(members, removed) - before
    # 6. Bounds, the result refused whole.
    per_remover = {}
    for t in removed.values():
        per_remover[t["removedBy"]] = per_remover.get(t["removedBy"], 0) + 1
    if any(n > 1024 for n in per_remover.values()):
        raise ProtocolError("malformed", "roster removals per remover")
    if len(members) > 10000 or len(removed) > 10000:
        raise ProtocolError("malformed", "roster size")
    result = {"version": local["version"], "members": members, "removed": removed}
    if len(encode_value(roster_state_value(result))) > 1048576:
        raise ProtocolError("payloadTooLarge")
    # 7. The version is local: +1 when the digest changed, never past 2^63 - 1.
    if roster_digest(result) != roster_digest(local):
        result["version"] = min(local["version"] + 1, (1 << 63) - 1)
    return result, newly


def preferred_entry(a, b):
    """§7.3 step 3 for another device's entry: the higher generation; with equal generations the lower
    member signature; then the key of an earlier day of the same commitment."""
    if a["generation"] != b["generation"]:
        return a if a["generation"] > b["generation"] else b
    kept = a if a["signature"] <= b["signature"] else b
    other = b if kept is a else a
    if other["commitment"] == kept["commitment"] and other["day"] < kept["day"]:
        kept = dict(kept, secret=other["secret"], day=other["day"])
    return kept


def member_signed_bytes(name, identity_key, commitment, generation):
    return b"baton/v1 member" + identity_key + commitment + u32be(generation) + name.encode("utf-8")


def introduction_signed_bytes(identity_key):
    return b"baton/v1 introduce" + identity_key


def removal_signed_bytes(device_id, cascading=False):
    return (b"baton/v1 remove subtree" if cascading else b"baton/v1 remove") + device_id


def cascade(members, removed):
    """§7.3 "Cascade": the entries (of `members`, the held entries) that cascading marks take out."""
    roots = {i: t["removedBy"] for i, t in removed.items() if t["cascading"]}
    if not roots:
        return set()
    intro = {i: set(m["introductions"]) for i, m in members.items()}
    intro.update({i: set(t["introductions"]) for i, t in removed.items() if t["key"] is not None and i not in roots})
    children = {}
    for i, introducers in intro.items():
        for by in introducers:
            children.setdefault(by, []).append(i)

    def reach(starts, within, stop=frozenset()):
        seen, frontier = set(), list(starts)
        while frontier:
            for c in children.get(frontier.pop(), []):
                if c in within and c not in seen:
                    seen.add(c)
                    if c not in stop:
                        frontier.append(c)
        return seen

    def subtree(spared):
        s = set(intro) - spared
        while True:
            reached = reach(roots, s)
            kept = {x for x in reached if all(by in reached or by in removed for by in intro[x])}
            if kept == s:
                return s
            s = kept

    first = subtree(set())
    # Spared: the largest set of removers in S0 that every walk from a root through S0 meets
    # first at that root's own remover (walks stop at the set).
    spared = {a for a in roots.values() if a in first}
    while spared:
        reached_by = {}
        for root, signer in roots.items():
            for x in reach([root], first, spared):
                reached_by.setdefault(x, set()).add(signer)
        kept = {a for a in spared if reached_by.get(a) == {a}}
        if kept == spared:
            break
        spared = kept
    return (subtree(spared) if spared else first) & set(members)


def ed25519_verifies(public_key, signature, message):
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
        return True
    except Exception:  # noqa: BLE001 - any failure is a bad signature
        return False


# The checks.
class Checker:
    def __init__(self):
        self.passed = self.failed = 0

    def equal(self, name, got, expected):
        ok = got == expected
        self.record(name, ok, "" if ok else f"got {show(got)}, expected {show(expected)}")

    def rejects(self, name, function, expected):
        kind, _, detail = expected.partition("(")
        detail = detail.rstrip(")") or None
        try:
            result = function()
        except ProtocolError as error:
            # The spec names some details exactly (malformed(length), …); others are free text.
            ok = error.kind == kind and (detail not in SPEC_DETAILS or error.detail == detail)
            self.record(name, ok, f"-> {error}" if ok else f"got {error}, expected {expected}")
        else:
            self.record(name, False, f"accepted ({show(result)}), expected {expected}")

    def record(self, name, ok, note=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'PASS' if ok else 'FAIL'} {name}{'  ' + note if note else ''}")


SPEC_DETAILS = {"length", "reserved", "name", "psm", "body", "revision", "date not finite", "roster member id",
                "activity type labels",
                # §6.7 names these.
                "kind", "expiry", "account length", "account characters", "account not UTF-8", "item count",
                "media type length", "media type characters", "item size",
                "media type repeated", "offset", "data beyond the item", "empty data", "data out of order",
                "total is not the offered size"}


def show(x):
    if isinstance(x, (bytes, bytearray)):
        return x.hex()
    if isinstance(x, tuple):
        return "(" + ", ".join(show(y) for y in x) + ")"
    return repr(x)


# What §10.4 says each value vector encodes (the JSON has it only as a comment).
DESCRIBED_VALUES = {
    'string "hé"': "hé",
    "integer -2": -2,
    "double 1.5": 1.5,
    "true": True,
    "false": False,
    "bytes 00 ff": b"\x00\xff",
    "date 1e9": Date(1e9),
    'array [1, "a"]': [1, "a"],
    'dictionary {b: true, a: 1, "é": []} (keys sorted by UTF-8 bytes)': {"b": True, "a": 1, "é": []},
}


def attempt(function, *arguments):
    """The result of function, with byte strings as hex, or the error's name."""
    try:
        result = function(*arguments)
    except ProtocolError as error:
        return str(error)
    if isinstance(result, tuple):
        return tuple(x.hex() if isinstance(x, bytes) else x for x in result)
    return result


def same_value(a, b):
    """Equality that also tells date from double and bool from integer."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


# §6.7 the clipboard frames of §10.5.
def check_clipboard(check, decoded):
    """decoded: [(request id, (type, request id, payload, fields))] of §10.5, in order."""
    offers = {i: f[3] for i, f in decoded if f[0] == 0x0E}
    asks = [i for i, f in decoded if f[0] == 0x0D]
    check.equal("clipboard: each ClipboardOffer answers a FetchClipboardOffer with its request id",
                sorted(offers), sorted(asks))
    check.equal("clipboard: two offers among the vectors", len(offers), 2)
    # What §10.5's text says the offers are: text in two types, and files (their list the one item).
    check.equal("clipboard: the offers are the ones §10.5 describes",
                [(o["offerId"].hex(), o["kind"], o["expiresIn"], o["account"], [m for m, _ in o["items"]]) for o in offers.values()],
                [("0123456789abcdef", "text", 120, "ada", ["text/plain;charset=utf-8", "text/html"]),
                 ("fedcba9876543210", "files", 120, "ada", [FILE_LIST_TYPE])])
    check.equal("clipboard: the text offer's sizes", [o["items"] for o in offers.values() if o["kind"] == "text"],
                [[["text/plain;charset=utf-8", 5], ["text/html", 12]]])
    by_id = {o["offerId"]: o for o in offers.values()}
    fetches = [(i, f[3]) for i, f in decoded if f[0] == 0x0F]
    answered = 0
    for request_id, fetch in fetches:
        name = f"clipboard: FetchClipboardData id {request_id}"
        offer = by_id.get(fetch["offerId"])
        if offer is None or fetch["mediaType"] not in [m for m, _ in offer["items"]]:
            check.record(f"{name}: names an offer and one of its media types", False)
            continue
        size = dict((m, s) for m, s in offer["items"])[fetch["mediaType"]]
        check.record(f"{name}: offset within the item ({fetch['offset']} <= {size})", fetch["offset"] <= size)
        frames = [f for i, f in decoded if i == request_id and f[0] != 0x0F]
        check.equal(f"{name}: answered by ClipboardData frames only", sorted({f[0] for f in frames}), [0x11])
        pull = ClipboardPull(offer, fetch["mediaType"], fetch["offset"])
        done, order = False, []
        for frame in frames:
            order.append(attempt(pull.take, frame[3]))
            done = order[-1] is True
        check.equal(f"{name}: each frame follows the one before, total = offered size, last ends at the total",
                    (order[:-1] == [False] * (len(order) - 1), done, pull.next), (True, True, size))
        empties = [f[3]["offset"] for f in frames if not f[3]["data"]]
        check.record(f"{name}: an empty ClipboardData only at the total", all(o == size for o in empties))
        if fetch["offset"] == size:
            check.equal(f"{name}: a request at the end is answered by one empty frame",
                        [(f[3]["offset"], f[3]["data"]) for f in frames], [(size, b"")])
        answered += 1
    # §10.5 says the text's first item is `hello` (request id 16, from offset 0); the files offer's item is its list.
    whole = {by_id[x["offerId"]]["kind"]: b"".join(f[3]["data"] for j, f in decoded if j == i and f[0] == 0x11) for i, x in fetches if x["offset"] == 0}
    check.equal("clipboard: the text item asked from offset 0 is `hello`", whole.get("text"), b"hello")
    check.equal("clipboard: three data requests among the vectors, all answered", (len(fetches), answered), (3, 3))
    check_clipboard_files(check, decoded, by_id, whole.get("files", b""))
    # §6.7: a copy that changed is Error(unknownActivity), message `clipboard changed`.
    changed = [f[3] for i, f in decoded if f[0] == 0x06 and f[3]["message"] == "clipboard changed"]
    check.equal("clipboard: a copy that changed is unknownActivity `clipboard changed`",
                [c["code"] for c in changed], ["unknownActivity"])

    # The receiver's own rules against streams that break them (self-consistency: no vectors for these).
    offer = next(o for o in offers.values() if o["kind"] == "text")
    media_type, size = offer["items"][0]
    def run(start, frames):
        pull = ClipboardPull(offer, media_type, start)
        for frame in frames:
            pull.take(frame)
        return pull.data
    check.rejects("clipboard receiver: first frame not at the asked offset",
                  lambda: run(0, [{"offset": 1, "total": size, "data": b"ello"}]), "malformed(data out of order)")
    check.rejects("clipboard receiver: a gap between frames",
                  lambda: run(0, [{"offset": 0, "total": size, "data": b"he"}, {"offset": 3, "total": size, "data": b"lo"}]),
                  "malformed(data out of order)")
    check.rejects("clipboard receiver: a frame after the last",
                  lambda: run(0, [{"offset": 0, "total": size, "data": b"hello"}, {"offset": size, "total": size, "data": b""}]),
                  "malformed(data out of order)")
    check.rejects("clipboard receiver: total is not the offered size",
                  lambda: run(0, [{"offset": 0, "total": size + 1, "data": b"hello"}]),
                  "malformed(total is not the offered size)")


# §6.7 "Files": the list of §10.5's files offer, and each FetchClipboardFile's answer.
def check_clipboard_files(check, decoded, offers_by_id, list_bytes):
    files = attempt(decode_file_list, list_bytes)
    check.equal("files: the list is the one §10.5 describes", files,
                [["notes ü.txt", 3, "text/plain"], ["empty", 0, "application/octet-stream"]])
    if not isinstance(files, list):
        return
    check.equal("files: the list re-encodes", encode_file_list(files), list_bytes)
    asks = [(i, f[3]) for i, f in decoded if f[0] == 0x12]
    for request_id, ask in asks:
        name = f"files: FetchClipboardFile id {request_id}"
        offer = offers_by_id.get(ask["offerId"])
        check.record(f"{name}: names the files offer", offer is not None and offer["kind"] == "files")
        answer = [f for i, f in decoded if i == request_id and f[0] != 0x12]
        if answer and answer[0][0] == 0x06:
            check.equal(f"{name}: a changed file is Error(fileChanged)", [f[3]["code"] for f in answer], ["fileChanged"])
            continue
        listed = files[ask["index"]] if ask["index"] < len(files) else None
        info = answer[0][3] if answer and answer[0][0] == 0x08 else None
        check.equal(f"{name}: its DocumentInfo describes the listed file (size, media type, name)",
                    info and [info["documentId"], info["totalSize"], info["mediaType"]], listed)
        check.equal(f"{name}: then DocumentChunk frames only", sorted({f[0] for f in answer[1:]}) or [0x09], [0x09])
    check.equal("files: four file requests among the vectors", len(asks), 4)


# §7 whole exchange (§10.8).
def identity_public(seed):
    return Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def x25519_public(private):
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def sign(seed, message):
    return Ed25519PrivateKey.from_private_bytes(seed).sign(message)


# §8.1 identity proof inside the TLS channel (§10.11).
CHANNEL_LABELS = {"client": b"baton/v1 channel client", "server": b"baton/v1 channel server"}


def channel_proof(role, seed, exporter):
    """Ed25519(identity, label(role) || X): the bare 64-byte signature, no key, no header."""
    if len(exporter) != 32:
        raise ProtocolError("malformed", "exporter length")
    return sign(seed, CHANNEL_LABELS[role] + exporter)


def check_channel_proof(role, proof, exporter, pinned):
    """What the receiving side does (§8.1 steps 2 and 3): the pinned key the proof verifies under, or raises."""
    if len(proof) != 64:
        raise ProtocolError("malformed", "channel proof length")
    for key in pinned:
        if ed25519_verifies(key, proof, CHANNEL_LABELS[role] + exporter):
            return key
    raise ProtocolError("notRingMember")


def check_channel_proofs(check, proofs):
    h = bytes.fromhex
    for c in proofs:
        role, seed, exporter, proof = c["role"], h(c["identitySeed"]), h(c["exporter"]), h(c["proof"])
        other = "server" if role == "client" else "client"
        name = f"channel proof ({role})"
        check.equal(f"{name}: identity key", identity_public(seed), h(c["identityKey"]))
        check.equal(f"{name}: signed bytes", CHANNEL_LABELS[role] + exporter, h(c["signedBytes"]))
        check.equal(f"{name}: bytes", channel_proof(role, seed, exporter), proof)
        pinned = [identity_public(bytes([0x55] * 32)), identity_public(seed)]
        check.equal(f"{name}: found among the pinned keys", attempt(check_channel_proof, role, proof, exporter, pinned),
                    identity_public(seed))
        check.record(f"{name}: carries no key", identity_public(seed) not in proof)
        check.rejects(f"{name}: checked as the other role", lambda: check_channel_proof(other, proof, exporter, pinned), "notRingMember")
        check.rejects(f"{name}: another session's X", lambda: check_channel_proof(role, proof, bytes(32), pinned), "notRingMember")
        check.rejects(f"{name}: a peer that does not pin it", lambda: check_channel_proof(role, proof, exporter, pinned[:1]), "notRingMember")
        check.rejects(f"{name}: one byte short", lambda: check_channel_proof(role, proof[:63], exporter, pinned), "malformed")


def hkdf_expand(prk, info, length):
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac_sha256(prk, block + info + bytes([counter]))
        out += block
        counter += 1
    return out[:length]


def hkdf_expand_label(secret, label, context, length):
    """§8.1 (RFC 8446 §7.1), SHA-256 suites."""
    full = b"tls13 " + label
    return hkdf_expand(secret, u16be(length) + bytes([len(full)]) + full + bytes([len(context)]) + context, length)


def tls_exporter(exporter_master_secret, label, length):
    """§8.1: X with an empty context; returns (S', X)."""
    empty = hashlib.sha256(b"").digest()
    derived = hkdf_expand_label(exporter_master_secret, label, empty, 32)
    return derived, hkdf_expand_label(derived, b"exporter", empty, length)


def check_tls_exporter(check, x):
    h = bytes.fromhex
    check.equal("TLS exporter: hash of the vector's suite", x["hash"], "SHA-256")
    check.equal("TLS exporter: the label of §8.1", x["label"], "EXPORTER-baton/v1 channel")
    derived, exporter = tls_exporter(h(x["exporterMasterSecret"]), b"EXPORTER-baton/v1 channel", 32)
    check.equal("TLS exporter: S'", derived, h(x["secret"]))
    check.equal("TLS exporter: X", exporter, h(x["exporter"]))


def roster_value(version, members, removed):
    """§7.3: members as (name, identity seed, (S_day, day, commitment), generation, introducer seed, (introducer id, signature) or None), removed as
    (device id, remover seed); every signature made here from the seeds; sorted as senders sort them."""
    entries = []
    for name, seed, (secret, day, commitment), generation, introducer in members:
        key = identity_public(seed)
        entry = {"deviceId": device_id_of(key), "name": name, "identityKey": key, "secret": secret, "generation": generation,
                 "day": day, "commitment": commitment,
                 "signature": sign(seed, member_signed_bytes(name, key, commitment, generation))}
        if isinstance(introducer, tuple):  # (introducer id, signature) of a device removed since
            entry["introducedBy"], entry["introduction"] = introducer
        elif introducer is not None:
            entry["introducedBy"] = device_id_of(identity_public(introducer))
            entry["introduction"] = sign(introducer, introduction_signed_bytes(key))
        entries.append(entry)
    marks = [{"deviceId": device_id, "removedBy": device_id_of(identity_public(remover)),
              "signature": sign(remover, removal_signed_bytes(device_id))} for device_id, remover in removed]
    return {"version": version, "members": sorted(entries, key=lambda m: m["deviceId"]),
            "removed": sorted(marks, key=lambda m: m["deviceId"])}


def identity_signed_bytes(role, h, name, key):
    # No secret: the identity goes out before the peer is checked (§7.2).
    return b"baton/v1 identity" + bytes([1 if role == "initiator" else 2]) + h + name.encode("utf-8") + key


def check_pairing_exchange(check, x):
    h = bytes.fromhex
    sid = h(x["sessionID"])
    parties = {role: x[role] for role in ("initiator", "responder")}
    pub = {role: x25519_public(h(q["x25519Private"])) for role, q in parties.items()}
    nonce = {role: h(q["nonce"]) for role, q in parties.items()}
    commit = commitment(pub["initiator"], nonce["initiator"])
    transcript = transcript_hash(sid, commit, pub["initiator"], nonce["initiator"], pub["responder"], nonce["responder"])
    check.equal("exchange: H", transcript.hex(), x["transcriptHash"])
    check.equal("exchange: SAS", sas(transcript), x["code"])
    check.equal("exchange: second code", second_code(transcript), x["secondCode"])
    keys = dict(zip(("initiator", "responder"), pairing_keys(x25519(h(parties["initiator"]["x25519Private"]), pub["responder"]), transcript)))
    expected = {("initiator", "pairCommit"): encode_frame(0x20, 0, bytes([1]) + sid + commit),
                ("responder", "pairHello"): encode_frame(0x21, 0, pub["responder"] + nonce["responder"]),
                ("initiator", "pairReveal"): encode_frame(0x22, 0, pub["initiator"] + nonce["initiator"])}
    messages = {}
    for role, q in parties.items():
        key = identity_public(h(q["identitySeed"]))
        check.equal(f"exchange: {role} identity key from seed", key.hex(), q["identityKey"])
        check.equal(f"exchange: {role} device id", device_id_of(key).hex(), q["deviceId"])
        signed = identity_signed_bytes(role, transcript, q["name"], key)
        check.equal(f"exchange: {role} signed bytes", signed.hex(), q["signedBytes"])
        signature = Ed25519PrivateKey.from_private_bytes(h(q["identitySeed"])).sign(signed)
        check.equal(f"exchange: {role} identity signature", signature.hex(), q["signature"])
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(h(q["signature"]), signed)
            check.record(f"exchange: {role} signature verifies", True)
        except Exception as error:  # noqa: BLE001 - any failure is a failed check
            check.record(f"exchange: {role} signature verifies", False, str(error))
        identity = {"msg": "identity", "name": q["name"], "identityKey": key, "signature": signature}
        if q["endpoints"]:
            identity["endpoints"] = list(q["endpoints"])
        check.equal(f"exchange: {role} commitment is S_(day+1024)", ratchet(h(q["secret"]), q["day"], q["day"] + CHAIN_DAYS).hex(), q["commitment"])
        own = (h(q["secret"]), q["day"], h(q["commitment"]))
        roster = roster_value(q["rosterVersion"], [(q["name"], h(q["identitySeed"]), own, q["generation"], None)], [])
        messages[role] = [{"msg": "confirm", "accepted": True}, identity, {"msg": "roster", "roster": encode_value(roster)}]
        for counter, message in enumerate(messages[role]):
            expected[(role, message["msg"])] = encode_frame(0x23, 0, seal_pairing_message(keys[role], transcript, counter, message))
    # Each side's own order (§7.2): the handshake frames, then confirm, identity, roster with counters 0, 1, 2.
    order = {"initiator": ["pairCommit", "pairReveal", "confirm", "identity", "roster"],
             "responder": ["pairHello", "confirm", "identity", "roster"]}
    for role in order:
        check.equal(f"exchange: {role} sends in the order of §7.1-7.2", [f["message"] for f in x["frames"] if f["from"] == role], order[role])
    opened = {"initiator": 0, "responder": 0}
    for frame in x["frames"]:
        name = f"exchange: {frame['from']} {frame['message']}"
        check.equal(f"{name}: bytes built from the inputs", expected.get((frame["from"], frame["message"]), b"").hex(), frame["frame"])
        frame_type, request_id, payload, fields = decode_frame(h(frame["frame"]))
        check.equal(f"{name}: request id 0", request_id, 0)
        if frame_type == 0x23:
            counter = opened[frame["from"]]
            check.equal(f"{name}: counter", (fields["counter"], frame["counter"]), (counter, counter))
            message = open_pairing_message(keys[frame["from"]], transcript, counter, payload)
            opened[frame["from"]] = counter + 1
            check.equal(f"{name}: plaintext", encode_value(message).hex(), frame["plaintext"])
            check.record(f"{name}: opens to the message built from the inputs", same_value(message, messages[frame["from"]][counter]))
            if message["msg"] == "roster":
                decode_roster_value(decode_value(message["roster"]))
    wrong = bytearray(h(x["frames"][3]["frame"])[12:])
    wrong[-1] ^= 1
    check.rejects("exchange: a PairSealed with a flipped tag bit", lambda: open_pairing_message(keys["initiator"], transcript, 0, bytes(wrong)), "authenticationFailed")


def check_rosters(check, rosters):
    h = bytes.fromhex
    for vector in rosters:
        name = f"roster: {vector['comment']}"
        members = []
        seeds = {}
        for m in vector["members"]:
            key = identity_public(h(m["identitySeed"]))
            seeds[device_id_of(key).hex()] = h(m["identitySeed"])
            check.equal(f"{name}: {m['name']} device id", device_id_of(key).hex(), m["deviceId"])
            signed = member_signed_bytes(m["name"], key, h(m["commitment"]), m["generation"])
            check.equal(f"{name}: {m['name']} key leads to the commitment", chain_end(h(m["secret"]), m["day"], h(m["commitment"])) is not None, True)
            check.equal(f"{name}: {m['name']} signed bytes", signed.hex(), m["signedBytes"])
            check.equal(f"{name}: {m['name']} signature", sign(h(m["identitySeed"]), signed).hex(), m["signature"])
        removed_keys = {mark["deviceId"]: h(mark["identityKey"]) for mark in vector["removed"]}
        for m in vector["members"]:
            introducer = seeds.get(m.get("introducedBy") or "")
            key = identity_public(h(m["identitySeed"]))
            if introducer is None and m.get("introducedBy") in removed_keys:
                # Introduced by a device removed since (its tombstone keeps its key): checked, not re-made.
                check.equal(f"{name}: {m['name']} introduction by a removed device verifies",
                            ed25519_verifies(removed_keys[m["introducedBy"]], h(m["introduction"]), introduction_signed_bytes(key)), True)
                introducer = (h(m["introducedBy"]), h(m["introduction"]))
            check.equal(f"{name}: {m['name']} introducer is or was a member", m.get("introducedBy") is None or introducer is not None, True)
            if introducer is not None:
                check.equal(f"{name}: {m['name']} introduction signed bytes", introduction_signed_bytes(key).hex(), m["introductionSignedBytes"])
                if not isinstance(introducer, tuple):
                    check.equal(f"{name}: {m['name']} introduction", sign(introducer, introduction_signed_bytes(key)).hex(), m["introduction"])
            members.append((m["name"], h(m["identitySeed"]), (h(m["secret"]), m["day"], h(m["commitment"])), m["generation"], introducer))
        # Tombstones keep the removed device's key and introductions (§7.3): signatures are checked
        # under the keys the roster holds, members' and tombstones' alike (a removed device's
        # introductions and marks stay checkable).
        keys = {device_id_of(identity_public(seed)).hex(): identity_public(seed) for seed in seeds.values()}
        keys.update({mark["deviceId"]: h(mark["identityKey"]) for mark in vector["removed"]})
        records = []
        for mark in vector["removed"]:
            check.equal(f"{name}: tombstone {mark['deviceId']} device id", device_id_of(h(mark["identityKey"])).hex(), mark["deviceId"])
            cascading = mark.get("cascading", False)
            check.equal(f"{name}: removal signed bytes", removal_signed_bytes(h(mark["deviceId"]), cascading).hex(), mark["signedBytes"])
            remover_key = keys.get(mark["removedBy"])
            check.equal(f"{name}: remover of {mark['deviceId']} was a member", remover_key is not None, True)
            if remover_key is not None:
                check.equal(f"{name}: removal signature verifies",
                            ed25519_verifies(remover_key, h(mark["signature"]), removal_signed_bytes(h(mark["deviceId"]), cascading)), True)
                if mark["removedBy"] in seeds:
                    check.equal(f"{name}: removal signature",
                                sign(seeds[mark["removedBy"]], removal_signed_bytes(h(mark["deviceId"]), cascading)).hex(), mark["signature"])
            for intro in mark["introductions"]:
                introducer_key = keys.get(intro["introducedBy"])
                check.equal(f"{name}: tombstone {mark['deviceId']} introduction verifies", introducer_key is not None and
                            ed25519_verifies(introducer_key, h(intro["signature"]), introduction_signed_bytes(h(mark["identityKey"]))), True)
            record = h(mark["identityKey"]) + h(mark["removedBy"]) + h(mark["signature"]) + (b"\x01" if cascading else b"") + \
                b"".join(h(i["introducedBy"]) + h(i["signature"]) for i in sorted(mark["introductions"], key=lambda i: i["introducedBy"]))
            check.equal(f"{name}: tombstone record", record.hex(), mark["record"])
            records.append((h(mark["deviceId"]), record))
        value = roster_value(vector["version"], members, [])
        value["removed"] = [record for _, record in sorted(records)]
        encoded = encode_value(value)
        check.equal(f"{name}: encode", encoded.hex(), vector["roster"])
        check.equal(f"{name}: RingSync frame", encode_frame(0x10, vector["ringSyncRequestID"], encoded).hex(), vector["ringSyncFrame"])
        frame_type, request_id, payload, fields = decode_frame(h(vector["ringSyncFrame"]))
        state = roster_state(fields)
        check.equal(f"{name}: decode", (fields["version"], sorted(i.hex() for i in state["members"]), sorted(i.hex() for i in state["removed"])),
                    (vector["version"], sorted(m["deviceId"] for m in vector["members"]), sorted(d["deviceId"] for d in vector["removed"])))
        check.equal(f"{name}: re-encode", encode_value(fields).hex(), vector["roster"])
        check.equal(f"{name}: digest", roster_digest(state).hex(), vector["digest"])
        check.equal(f"{name}: taken out by a cascade (§7.3 step 5a)", sorted(i.hex() for i in cascade(state["members"], state["removed"])),
                    vector.get("takenOut", []))
        check.equal(f"{name}: encoded from its parts", encode_value(roster_state_value(state)).hex(), vector["roster"])


def check_roster_merges(check, merges):
    """§7.3's merge run from the vectors' bytes: the result, its digest and what became removed, or the
    refusal; then the same rosters in every other delivery order reach the same digest."""
    h = bytes.fromhex
    for vector in merges:
        name = f"roster merge: {vector['comment']}"
        me = h(vector["me"])
        state = roster_state(decode_value(h(vector["local"])))
        before = roster_digest(state)
        newly = set()
        try:
            for index, received in enumerate(vector["received"]):
                anchor = h(vector["anchor"]) if index == 0 and vector.get("anchor") else None
                state, removed_now = merge_rosters(state, roster_state(decode_value(h(received))), me, anchor)
                newly |= removed_now
        except ProtocolError as error:
            check.equal(f"{name}: refused", str(error.kind), vector.get("error"))
            continue
        check.equal(f"{name}: accepted", None, vector.get("error"))
        check.equal(f"{name}: result", encode_value(roster_state_value(state)).hex(), vector["result"])
        check.equal(f"{name}: digest", roster_digest(state).hex(), vector["digest"])
        check.equal(f"{name}: newly removed", sorted(i.hex() for i in newly), vector["newlyRemoved"])
        if "members" in vector:
            out = cascade(state["members"], state["removed"])
            check.equal(f"{name}: members (§7.3 Cascade)", sorted(i.hex() for i in state["members"] if i not in out), vector["members"])
        if len(vector["received"]) == 1:
            grew = state["version"] - roster_state(decode_value(h(vector["local"])))["version"]
            check.equal(f"{name}: version +1 exactly when the digest changed", grew, 0 if roster_digest(state) == before else 1)
        if vector.get("anchor"):
            continue
        # Commutative, associative, idempotent: every order of the received rosters, each merged twice.
        for order in itertools.permutations(vector["received"]):
            other = roster_state(decode_value(h(vector["local"])))
            for received in order + order:
                other, _ = merge_rosters(other, roster_state(decode_value(h(received))), me)
            check.equal(f"{name}: same digest in another order, merged twice", roster_digest(other).hex(), vector["digest"])


def stored_key_after_merge(stored, received, receiver_day):
    """§3.1/§7.3, equal generations: the received key (S_d, d, C) replaces the stored one only when it
    leads to the same C from an earlier day; the kept key is then moved forward to the receiver's day D."""
    secret, day, commitment = stored
    r_secret, r_day, r_commitment = received
    if chain_end(r_secret, r_day, r_commitment) is None:
        raise ValueError("badSignature")
    if r_commitment == commitment and r_day < day:
        secret, day = r_secret, r_day
    elif r_commitment != commitment:
        # §7.3: equal generations under two commitments: the entry with the lower member signature
        # bytes is kept, whichever side holds it (the vectors' member: "laptop", seed 55…, generation 1).
        seed = bytes([0x55]) * 32
        def signature(c):
            return sign(seed, member_signed_bytes("laptop", identity_public(seed), c, 1))
        if signature(r_commitment) < signature(commitment):
            secret, day, commitment = r_secret, r_day, r_commitment
    if day < receiver_day:
        secret, day = ratchet(secret, day, receiver_day), receiver_day
    return secret, day, commitment


def check_key_merges(check, merges):
    h = bytes.fromhex
    for vector in merges:
        name = f"key merge: {vector['comment']}"
        stored, received, result = (vector[k] for k in ("stored", "received", "result"))
        for label, key in (("stored", stored), ("received", received)):
            check.equal(f"{name}: {label} key leads to its commitment", chain_end(h(key["secret"]), key["day"], h(key["commitment"])) is not None, True)
        kept = stored_key_after_merge((h(stored["secret"]), stored["day"], h(stored["commitment"])),
                                      (h(received["secret"]), received["day"], h(received["commitment"])), vector["receiverDay"])
        check.equal(f"{name}: the key kept", (kept[0].hex(), kept[1], kept[2].hex()), (result["secret"], result["day"], result["commitment"]))
        check.equal(f"{name}: never before the receiver's day", result["day"] >= vector["receiverDay"], True)


def main():
    vectors = json.loads(VECTORS.read_text())
    check = Checker()
    h = bytes.fromhex

    # §3 key schedule.
    schedule = vectors["keySchedule"]
    secret, issued = h(schedule["secret"]), schedule["day"]
    chain_commitment = ratchet(secret, issued, issued + CHAIN_DAYS)
    check.equal("keys: commitment C = S_(a+1024)", chain_commitment.hex(), schedule["commitment"])
    check.equal("keys: the chain ends at a+1024", chain_end(secret, issued, chain_commitment), issued + CHAIN_DAYS)
    check.equal("keys: a later day's key does not lead back", chain_end(ratchet_step(secret, issued + 1), issued, chain_commitment), None)
    keys = Keys(secret, chain_commitment)
    check.equal("keys: K_tag", keys.tag.hex(), schedule["tagKey"])
    check.equal("keys: K_type", keys.type.hex(), schedule["typeKey"])
    check.equal("keys: K_mdns", keys.mdns.hex(), schedule["mdnsKey"])
    for entry in schedule["epochs"]:
        e = entry["epoch"]
        check.equal(f"keys: day of epoch {e}", e // EPOCHS_PER_DAY, entry["day"])
        day_key = ratchet(secret, issued, e // EPOCHS_PER_DAY)
        check.equal(f"keys: S_d epoch {e}", day_key.hex(), entry["dayKey"])
        day_keys = Keys(day_key, chain_commitment)
        check.equal(f"keys: tag_e epoch {e}", day_keys.advert_tag(e).hex(), entry["tag"])
        check.equal(f"keys: mask_e epoch {e}", f"{day_keys.mask(e):02x}", entry["mask"])
        check.equal(f"keys: K_seal_e epoch {e}", day_keys.seal(e).hex(), entry["sealKey"])
        check.equal(f"keys: mDNS instance epoch {e}", day_keys.mdns_instance(e), entry["mdnsInstance"])
    for entry in schedule["typeHashes"]:
        check.equal(f"keys: typeHash {entry['activityType']}", keys.type_hash(entry["activityType"]).hex(), entry["typeHash"])

    # §4 ring adverts: seal from the inputs, open with a receiver, replay rules over the sequence.
    adverts = vectors["ringAdverts"]
    for vector in adverts:
        name = f"ring advert: {vector['comment']}"
        vector_keys = Keys(h(vector["secret"]))
        check.equal(f"{name}: nonce", advert_nonce(vector["epoch"], vector["sequence"]).hex(), vector["nonce"])
        sealed = seal_ring_advert(vector_keys, vector["epoch"], vector["sequence"], h(vector["typeHash"]),
                                  vector["revision"], vector["flags"])
        check.equal(f"{name}: seal", sealed.hex(), vector["advert"])
        ring = {"m": (h(vector["secret"]), vector["generation"])}
        receiver = Receiver(ring, vector["epoch"])
        check.equal(f"{name}: open", attempt(lambda a: receiver.open(a)[:4] + receiver.open(a)[5], h(vector["advert"])),
                    ("m", vector["epoch"], vector["sequence"], vector["generation"],
                     vector["typeHash"], vector["revision"], vector["flags"]))
        # §4.1 flags read by name: bits 4-5 are the clipboard kind, which the comment names ("bits 4-5 = N").
        described = re.search(r"bits 4-5 = (\d)", vector["comment"])
        kind = CLIPBOARD_KINDS[int(described.group(1))] if described else None
        word = re.search(r"clipboard copy of (\w+)", vector["comment"])
        check.equal(f"{name}: clipboard kind (bits 4-5)", advert_flags(receiver.open(h(vector["advert"]))[5][2])["clipboard"],
                    kind)
        if word:
            check.equal(f"{name}: the comment's kind is bits 4-5's", {"text": "text", "image": "image", "files": "files"}.get(word.group(1)), kind)
        check.equal(f"{name}: first sighting", attempt(receiver.receive, h(vector["advert"])), "newRevision")
        check.equal(f"{name}: second sighting", attempt(receiver.receive, h(vector["advert"])), "sameRevision")
    # Replay rules (§4.3 step 6) over the vectors that form one sender's history (revisions 1, 2, 3).
    history = [h(v["advert"]) for v in adverts if v["revision"] in (1, 2, 3)]
    near_wrap = [h(v["advert"]) for v in adverts if v["revision"] == 0xFFFFFF]
    receiver = Receiver({"m": (secret, 1)}, clock_epoch=adverts[0]["epoch"])
    check.equal("ring advert: revisions 1, 2, 3 in order", [attempt(receiver.receive, a) for a in history],
                ["newRevision"] * 3)
    check.rejects("ring advert: revision 1 after revision 3 (older epoch)", lambda: receiver.receive(history[0]), "staleEpoch")
    check.rejects("ring advert: revision 2^24-1 after 3 (RFC 1982: older)", lambda: receiver.receive(near_wrap[0]), "staleRevision")
    receiver = Receiver({"m": (secret, 1)}, clock_epoch=adverts[0]["epoch"])
    receiver.receive(history[1])
    check.rejects("ring advert: seq 0 after seq 1, same epoch", lambda: receiver.receive(history[0]), "replayedSequence")
    receiver = Receiver({"m": (secret, 2)}, clock_epoch=adverts[0]["epoch"])
    receiver.state["m"] = (adverts[0]["epoch"] + 1, 255, 0, 1, b"")  # state from generation 1
    check.equal("ring advert: new generation skips epoch and sequence rules", attempt(receiver.receive, history[1]), "newRevision")

    # §5 pairing adverts.
    for vector in vectors["pairingAdverts"]:
        name = f"pairing advert {vector['sessionID']}"
        encoded = encode_pairing_advert(h(vector["sessionID"]), vector["tcpPublished"], vector.get("psm"), vector["name"])
        check.equal(f"{name}: encode", encoded.hex(), vector["advert"])
        check.equal(f"{name}: decode", attempt(decode_pairing_advert, h(vector["advert"])), (vector["sessionID"], vector["tcpPublished"], vector.get("psm"), vector["name"]))

    # §6.4 property values.
    for vector in vectors["values"]:
        name = f"value {vector['comment']}"
        encoded = h(vector["encoded"])
        try:
            decoded = decode_value(encoded)
        except ProtocolError as error:
            check.record(f"{name}: decode", False, str(error))
            continue
        check.equal(f"{name}: re-encode", encode_value(decoded).hex(), vector["encoded"])
        described = DESCRIBED_VALUES.get(vector["comment"])
        if described is None:
            check.record(f"{name}: described value", False, "comment not understood by spec-check.py")
        else:
            check.record(f"{name}: decodes to the described value", same_value(decoded, described), show(decoded))
            check.equal(f"{name}: encode the described value", encode_value(described).hex(), vector["encoded"])

    # §6.1–6.3 frames.
    for vector in vectors["frames"]:
        name = f"frame type 0x{vector['type']:02x} id {vector['requestID']}"
        check.equal(f"{name}: encode", encode_frame(vector["type"], vector["requestID"], h(vector["payload"])).hex(), vector["frame"])
        try:
            frame_type, request_id, payload, fields = decode_frame(h(vector["frame"]))
        except ProtocolError as error:
            check.record(f"{name}: decode", False, str(error))
            continue
        check.equal(f"{name}: decode header", (frame_type, request_id, payload.hex()),
                    (vector["type"], vector["requestID"], vector["payload"]))
        check.equal(f"{name}: payload fields re-encode", encode_payload(frame_type, fields).hex(), vector["payload"])
        if frame_type == 0x01:  # §6.2: Hello carries request id 0 and, in v1, announces 1,048,576
            check.equal(f"{name}: Hello id and max payload", (request_id, fields["maxPayload"]), (0, 1048576))

    # §6.5: the chunks of a document stream (the answer to FetchDocument or FetchClipboardFile, one request id),
    # in order from the asked offset, end at the total; a stream from 0 hashes to the digest its DocumentInfo
    # announced, and a resumed one continues the bytes of the stream from 0 with that digest.
    streams = {}
    for v in vectors["frames"]:
        frame_type, request_id, _, fields = decode_frame(h(v["frame"]))
        if frame_type in (0x07, 0x12, 0x08, 0x09):
            streams.setdefault(request_id, []).append((frame_type, fields))
    whole = {}
    for request_id, frames in sorted(streams.items()):
        asked = [f for t, f in frames if t in (0x07, 0x12)]
        answer = [(t, f) for t, f in frames if t in (0x08, 0x09)]
        if not answer:
            continue
        name = f"document stream id {request_id}"
        check.equal(f"{name}: one request, then DocumentInfo first", (len(asked), answer[0][0]), (1, 0x08))
        info, start = answer[0][1], asked[0]["offset"]
        offsets = [f["offset"] for _, f in answer[1:]]
        data = b"".join(f["data"] for _, f in answer[1:])
        expected = [start + sum(len(f["data"]) for _, f in answer[1:k + 1]) for k in range(len(offsets))]
        check.equal(f"{name}: chunks contiguous from the asked offset to the total", (offsets, start + len(data)), (expected, info["totalSize"]))
        if start == 0:
            check.equal(f"{name}: size and SHA-256 of the chunks", (len(data), hashlib.sha256(data).digest().hex()),
                        (info["totalSize"], info["digest"].hex()))
            whole[info["digest"]] = data
        else:
            check.equal(f"{name}: a resume asks with the digest and continues those bytes",
                        (asked[0]["digest"] == info["digest"], whole.get(info["digest"], b"")[start:]), (True, data))
    infos = [f for frames in streams.values() for t, f in frames if t == 0x08]

    # §6.6: the grant of §10.5 names the snapshot of the document stream (revision 1, same digest).
    grants = [decode_frame(h(v["frame"]))[3] for v in vectors["frames"] if v["type"] == 0x0B]
    claims = [decode_frame(h(v["frame"]))[3] for v in vectors["frames"] if v["type"] == 0x0A]
    for grant, claim in zip(grants, claims):
        check.equal("edit session: a first claim (base 0) is granted revision 1 of the streamed snapshot",
                    (claim["baseRevision"], claim["documentId"], grant["revision"], grant["digest"].hex()),
                    (0, infos[0]["documentId"], 1, infos[0]["digest"].hex()))
    check.equal("edit session: one claim and one grant among the vectors", (len(claims), len(grants)), (1, 1))

    # §6.2, §9 step 3: the FetchActivityOfVersions of §10.5 asks for versions that leave out the version of the
    # activity answered under request id 7, and its answer (same request id) is Error(versionUnsupported).
    decoded = [(v["requestID"], decode_frame(h(v["frame"]))) for v in vectors["frames"]]
    current = [f[3]["version"] for i, f in decoded if f[0] == 0x03]
    asks = [(i, f[3]) for i, f in decoded if f[0] == 0x0C]
    for request_id, ask in asks:
        answers = [f[3]["code"] for i, f in decoded if i == request_id and f[0] == 0x06]
        outside = all(not lowest <= version <= highest for version in current for lowest, highest in ask["versions"])
        check.equal(f"versioned fetch id {request_id}: the version is outside the ranges, answered versionUnsupported",
                    (outside, answers), (True, ["versionUnsupported"]))
    check.equal("versioned fetch: one among the vectors", len(asks), 1)

    check_clipboard(check, decoded)

    # §7.1–7.2 pairing key agreement.
    p = {k: (h(v) if k not in ("sas",) else v) for k, v in vectors["pairing"].items()}
    check.equal("pairing: initiator public", X25519PrivateKey.from_private_bytes(p["initiatorPrivate"]).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex(), p["initiatorPublic"].hex())
    check.equal("pairing: responder public", X25519PrivateKey.from_private_bytes(p["responderPrivate"]).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex(), p["responderPublic"].hex())
    commit = commitment(p["initiatorPublic"], p["initiatorNonce"])
    check.equal("pairing: C", commit.hex(), p["commitment"].hex())
    transcript = transcript_hash(p["sessionID"], commit, p["initiatorPublic"], p["initiatorNonce"], p["responderPublic"], p["responderNonce"])
    check.equal("pairing: H", transcript.hex(), p["transcriptHash"].hex())
    check.equal("pairing: SAS", sas(transcript), p["sas"])
    z_initiator = x25519(p["initiatorPrivate"], p["responderPublic"])
    z_responder = x25519(p["responderPrivate"], p["initiatorPublic"])
    check.equal("pairing: Z (initiator)", z_initiator.hex(), p["sharedSecret"].hex())
    check.equal("pairing: Z (responder)", z_responder.hex(), p["sharedSecret"].hex())
    k_ir, k_ri = pairing_keys(z_initiator, transcript)
    check.equal("pairing: K_IR", k_ir.hex(), p["keyInitiatorToResponder"].hex())
    check.equal("pairing: K_RI", k_ri.hex(), p["keyResponderToInitiator"].hex())
    check.rejects("pairing: all-zero public key", lambda: x25519(p["initiatorPrivate"], bytes(32)), "weakKey")
    commit_frame = encode_frame(0x20, 0, bytes([1]) + p["sessionID"] + commit)
    check.equal("pairing: PairCommit payload is 41 bytes", len(decode_frame(commit_frame)[2]), 41)
    # Sealed messages have vectors in §10.8; this also checks the two directions fit together.
    message = {"msg": "confirm", "accepted": True}
    sealed = seal_pairing_message(k_ir, transcript, 0, message)
    check.record("pairing: sealed message opens (self-consistency)", same_value(open_pairing_message(k_ir, transcript, 0, sealed), message))
    check.rejects("pairing: sealed message with wrong counter", lambda: open_pairing_message(k_ir, transcript, 1, sealed), "replayedSequence")

    check_pairing_exchange(check, vectors["pairingExchange"])
    check_rosters(check, vectors["rosters"])
    check_key_merges(check, vectors["keyMerges"])
    check_roster_merges(check, vectors["rosterMerges"])
    check_channel_proofs(check, vectors["channelProofs"])
    check_tls_exporter(check, vectors["tlsExporter"])
    # §4.3 step 6 replay outcomes (§10.9).
    for vector in vectors["replays"]:
        receiver = Receiver({"m": (secret, 1)}, clock_epoch=2000000)
        check.equal(f"replay: {vector['comment']}", [attempt(receiver.receive, h(a)) for a in vector["adverts"]], vector["outcomes"])
        # What the two bodies differ in, read by §4.1: only bits 6-7 (ignored) when the outcome is sameRevision.
        opened = [receiver.open(h(a)) for a in vector["adverts"]]
        differ = opened[0][4][7] ^ opened[1][4][7]
        if "reserved flag bit" in vector["comment"]:
            check.equal(f"replay: {vector['comment']}: flags differ in bits 6-7 only, read alike",
                        (differ & 0x3F != 0, differ & 0xC0 != 0, advert_flags(opened[0][5][2]) == advert_flags(opened[1][5][2])),
                        (False, True, True))
        if "clipboard bits" in vector["comment"]:
            check.equal(f"replay: {vector['comment']}: flags differ in bits 4-5 only, other revision fields alike",
                        (differ & 0xCF, differ & 0x30 != 0, opened[0][4][:7] == opened[1][4][:7]), (0, True, True))

    # §10.7 rejections. Ring adverts go to a receiver holding S (generation 1) around the vectors' epoch.
    reject_receiver = Receiver({"m": (secret, 1)}, clock_epoch=adverts[0]["epoch"])
    decoders = {"ringAdvert": reject_receiver.open, "frame": decode_frame, "value": decode_value,
                "pairingAdvert": decode_pairing_advert, "roster": lambda b: decode_roster_value(decode_value(b)),
                "fileList": decode_file_list}
    for vector in vectors["rejects"]:
        decoder = decoders.get(vector["decoder"])
        name = f"reject {vector['decoder']} {vector['input'][:32]}{'…' if len(vector['input']) > 32 else ''}"
        if decoder is None:
            check.record(name, False, f"unknown decoder {vector['decoder']}")
            continue
        check.rejects(name, lambda: decoder(h(vector["input"])), vector["error"])

    # §3.1: zero ratchet steps do not count. One roster rejection carries a correctly signed entry whose
    # key is its own commitment; only the chain rule (1 to 1,024 steps) refuses it, as badSignature.
    zero_steps = []
    for vector in vectors["rejects"]:
        if vector["decoder"] != "roster":
            continue
        for member in decode_value(h(vector["input"]))["members"]:
            if member["secret"] == member["commitment"]:
                signed = member_signed_bytes(member["name"], member["identityKey"], member["commitment"], member["generation"])
                zero_steps.append((ed25519_verifies(member["identityKey"], member["signature"], signed),
                                   chain_end(member["secret"], member["day"], member["commitment"]), vector["error"]))
    check.equal("reject roster: a key equal to its commitment (0 steps), well signed, is badSignature", zero_steps,
                [(True, None, "badSignature")])

    print(f"{check.passed} passed, {check.failed} failed")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
