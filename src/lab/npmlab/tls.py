"""TLS for the lab's QUIC flows: a throw-away CA and the passive's certificate per results directory.

A study with QUIC flows gets, in its results directory, tls/ca.pem (a CA made for this directory
alone; its key is deleted once it has signed) and tls/server.key, tls/server.pem (the passives'
key and certificate, for the name HOSTNAME). Every passive of a QUIC pair runs with
--tls-key/--tls-cert of these, every active with --tls-ca=ca.pem and --tls-hostname=HOSTNAME, so
the certificate holds whichever address the active reaches the passive at (a namespace test bed's
or a host's). The files stay with the results (a --resume uses them again); nothing is written to
the source tree or the system's trust store.
"""

import os
import shutil
import subprocess
import tempfile

from .errors import LabError

HOSTNAME = "passive.npmlab.invalid"  # .invalid: a name no resolver answers (RFC 6761)
FOLDER = "tls"
FILES = ("ca.pem", "server.key", "server.pem")
DAYS = 3650  # a study may be resumed long after it began


def paths(outdir):
    """{file name: absolute path} of a results directory's TLS files."""
    return {name: os.path.abspath(os.path.join(outdir, FOLDER, name)) for name in FILES}


def ensure(outdir):
    """The results directory's CA and server certificate, made with openssl unless all are there;
    {file name: absolute path}."""
    files = paths(outdir)
    if all(os.path.isfile(p) for p in files.values()):
        return files
    if shutil.which("openssl") is None:
        raise LabError("QUIC flows need TLS certificates, made with openssl, which is not installed")
    os.makedirs(outdir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".tls-", dir=outdir)
    try:
        def openssl(*args):
            r = subprocess.run(["openssl", *args], cwd=work, capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                detail = (r.stderr or r.stdout).strip().splitlines()
                raise LabError(f"openssl {args[0]}: {detail[-1] if detail else 'exit ' + str(r.returncode)}")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", str(DAYS),
                "-subj", "/CN=netperfmeter-lab throw-away CA")
        openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={HOSTNAME}")
        with open(os.path.join(work, "server.ext"), "w") as f:
            f.write(f"subjectAltName=DNS:{HOSTNAME}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                    "extendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "server.pem", "-days", str(DAYS), "-extfile", "server.ext")
        os.chmod(os.path.join(work, "server.key"), 0o600)
        for name in ("ca.key", "ca.srl", "server.csr", "server.ext"):
            if os.path.exists(os.path.join(work, name)):
                os.unlink(os.path.join(work, name))
        target = os.path.join(outdir, FOLDER)
        shutil.rmtree(target, ignore_errors=True)
        os.rename(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return files


def quic_built(program):
    """Whether a netperfmeter has QUIC (its --help offers --tls-key); None when it cannot be asked."""
    try:
        r = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return help_offers_quic(r.stdout + r.stderr)


def help_offers_quic(text):
    return "--tls-key=FILE" in text
