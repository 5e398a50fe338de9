"""Just enough of QUIC v1's Initial packet protection (RFC 9001, section 5) for a test client
that answers a Retry: open a client Initial (taken off the wire) with the keys of its
Destination Connection ID, and seal its frames again for the connection ID and token of a Retry
(RFC 9000, 17.2.5 and 8.1). Written from the RFCs; it shares nothing with netperfmeter's C++
(ngtcp2), so it is a second implementation the server must agree with."""

import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
from cryptography.hazmat.primitives import hmac

INITIAL_SALT_V1 = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")


def _extract(salt, key):
    h = hmac.HMAC(salt, hashes.SHA256())
    h.update(key)
    return h.finalize()


def _expand_label(secret, label, length):
    full = b"tls13 " + label
    info = struct.pack("!HB", length, len(full)) + full + b"\0"
    return HKDFExpand(hashes.SHA256(), length, info).derive(secret)


def client_keys(dcid):
    """(key, iv, hp) of the client's Initial packets for this Destination Connection ID."""
    secret = _expand_label(_extract(INITIAL_SALT_V1, dcid), b"client in", 32)
    return (_expand_label(secret, b"quic key", 16), _expand_label(secret, b"quic iv", 12),
            _expand_label(secret, b"quic hp", 16))


def _mask(hp, sample):
    encryptor = Cipher(algorithms.AES(hp), modes.ECB()).encryptor()
    return encryptor.update(sample) + encryptor.finalize()


def _varint(data, at):
    first = data[at]
    length = 1 << (first >> 6)
    value = first & 0x3F
    for b in data[at + 1:at + length]:
        value = (value << 8) | b
    return value, at + length


def _varint_bytes(value):
    if value < 64:
        return bytes([value])
    if value < 16384:
        return struct.pack("!H", 0x4000 | value)
    return struct.pack("!I", 0x80000000 | value)


def open_initial(datagram):
    """The first packet of a client Initial datagram: (dcid, scid, packet number, frames)."""
    at = 5
    dcid = datagram[at + 1:at + 1 + datagram[at]]
    at += 1 + len(dcid)
    scid = datagram[at + 1:at + 1 + datagram[at]]
    at += 1 + len(scid)
    token_length, at = _varint(datagram, at)
    at += token_length
    length, pn_offset = _varint(datagram, at)
    key, iv, hp = client_keys(dcid)
    mask = _mask(hp, datagram[pn_offset + 4:pn_offset + 20])
    first = datagram[0] ^ (mask[0] & 0x0F)
    pn_length = (first & 0x03) + 1
    pn_bytes = bytes(b ^ m for b, m in zip(datagram[pn_offset:pn_offset + pn_length], mask[1:]))
    header = bytes([first]) + datagram[1:pn_offset] + pn_bytes
    pn = int.from_bytes(pn_bytes, "big")
    nonce = (int.from_bytes(iv, "big") ^ pn).to_bytes(12, "big")
    frames = AESGCM(key).decrypt(nonce, datagram[pn_offset + pn_length:pn_offset + length], header)
    return dcid, scid, pn, frames


def seal_initial(dcid, scid, token, pn, frames):
    """A client Initial packet carrying `frames` (at least 20 bytes of them, for the sample)."""
    key, iv, hp = client_keys(dcid)
    pn_bytes = pn.to_bytes(4, "big")
    length = len(pn_bytes) + len(frames) + 16
    header = (bytes([0xC0 | (len(pn_bytes) - 1)]) + struct.pack("!I", 1) + bytes([len(dcid)]) + dcid +
              bytes([len(scid)]) + scid + _varint_bytes(len(token)) + token + struct.pack("!H", 0x4000 | length))
    pn_offset = len(header)
    header += pn_bytes
    nonce = (int.from_bytes(iv, "big") ^ pn).to_bytes(12, "big")
    sealed = AESGCM(key).encrypt(nonce, frames, header)
    mask = _mask(hp, sealed[4 - len(pn_bytes):20 - len(pn_bytes)])
    protected = bytearray(header + sealed)
    protected[0] ^= mask[0] & 0x0F
    for i in range(len(pn_bytes)):
        protected[pn_offset + i] ^= mask[1 + i]
    return bytes(protected)


def parse_retry(datagram):
    """(scid, token) of a Retry packet, or None for any other datagram."""
    if len(datagram) < 7 or datagram[0] & 0xF0 != 0xF0:
        return None
    at = 5
    at += 1 + datagram[at]  # its DCID: the client's SCID
    scid = datagram[at + 1:at + 1 + datagram[at]]
    at += 1 + len(scid)
    return scid, datagram[at:-16]  # the Retry Integrity Tag last


def answer_retry(initial, retry):
    """The client's Initial again, for the Retry's connection ID and with its token."""
    _, scid, pn, frames = open_initial(initial)
    new_dcid, token = retry
    return seal_initial(new_dcid, scid, token, pn + 1, frames)
