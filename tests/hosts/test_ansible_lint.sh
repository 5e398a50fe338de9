#!/usr/bin/env bash
# ansible-lint (production profile, strict: warnings fail too; packaging/ansible/.ansible-lint)
# on the role netperfmeter_passive and the example playbook, and ansible-playbook's syntax
# check with the example inventory.
set -euo pipefail
dir=$(cd "$(dirname "$0")/../../packaging/ansible" && pwd)
for tool in ansible-lint ansible-playbook; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (Debian package ${tool%-playbook})"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME=$work ANSIBLE_HOME=$work/ansible ANSIBLE_LOCAL_TEMP=$work/tmp ANSIBLE_NOCOLOR=1 NO_COLOR=1
cd "$dir"
# Ansible refuses a non-blocking standard input (as a CI runner may hand down): it reads none here
exec </dev/null
ansible-playbook --syntax-check -i inventory.example.ini site.yml
ansible-lint --version
ansible-lint --offline --strict -p site.yml roles/netperfmeter_passive
echo "OK: ansible-lint (production profile) and the syntax check pass"
