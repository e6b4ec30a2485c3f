#!/usr/bin/env bash
# Checks, before any test runs, that every external program the build, tests and scripts execute
# (scripts/programs.txt) is installed from the Debian package listed for it, that
# scripts/install-deps.sh installs that package, and that no test or script runs a /usr/bin
# program missing from the list. A program installed by hand, or a package the install script
# forgets, would otherwise pass on a developer machine and fail on a fresh one.
set -uo pipefail
cd "$(dirname "$0")/.."
LIST=scripts/programs.txt
# The package names install-deps.sh installs: the words of its PKGS=( ... ) block.
declare -A INSTALLED
for p in $(sed -n '/^PKGS=(/,/^)/p' scripts/install-deps.sh | sed 's/PKGS=(//; s/)//'); do
  INSTALLED[$p]=1
done
fail=0
problem() { echo "check-programs: $*" >&2; fail=1; }
declare -A LISTED
while read -r prog pkg; do
  case "$prog" in '' | '#'*) continue ;; esac
  LISTED[$prog]=1
  [ -n "${INSTALLED[$pkg]:-}" ] ||
    problem "$prog comes from package '$pkg', which scripts/install-deps.sh does not install"
  if [[ "$prog" == python3:* ]]; then
    mod=${prog#python3:}
    path=$(/usr/bin/python3 -c "import $mod, sys; sys.stdout.write($mod.__file__)" 2>/dev/null) ||
      { problem "python module '$mod' is missing (package $pkg)"; continue; }
  else
    path=$prog
    [ -x "$path" ] || { problem "$path is missing (package $pkg)"; continue; }
  fi
  # dpkg -S knows the file under its real name (usrmerge, alternatives).
  owner=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | cut -d: -f1 | tr ',' '\n' | sed 's/ //g')
  [ -n "$owner" ] || owner=$(dpkg -S "$path" 2>/dev/null | cut -d: -f1 | tr ',' '\n' | sed 's/ //g')
  # Packages that ship into /bin (busybox) are known to dpkg there, /usr/bin being the merged path.
  [ -n "$owner" ] || [[ "$path" != /usr/bin/* ]] ||
    owner=$(dpkg -S "/bin/${path#/usr/bin/}" 2>/dev/null | cut -d: -f1 | tr ',' '\n' | sed 's/ //g')
  if ! grep -qx "$pkg" <<<"$owner"; then
    # Some programs reach their package through a dependency (c++ -> g++ via build-essential).
    deps=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
      --no-breaks --no-replaces --no-enhances "$pkg" 2>/dev/null | grep -v '^ ' | sort -u)
    found=0
    for o in $owner; do grep -qx "$o" <<<"$deps" && found=1; done
    [ $found = 1 ] || problem "$path does not come from package '$pkg' (dpkg: ${owner:-no package})"
  fi
done <"$LIST"
for used in $(grep -rhoE '"/usr/bin/[A-Za-z0-9_+.-]+"' tests scripts engine gateway shared kernels \
  --include='*.cpp' --include='*.h' --include='*.sh' --include='*.py' 2>/dev/null | tr -d '"' | sort -u); do
  [ -n "${LISTED[$used]:-}" ] || problem "$used is run by the tests or scripts but missing from $LIST"
done
if [ $fail != 0 ]; then
  echo "check-programs: install the packages with 'sudo bash scripts/install-deps.sh' (and list new ones there and in $LIST)" >&2
  exit 1
fi
echo "check-programs: $(grep -cvE '^(#|$)' "$LIST") programs present from the packages install-deps.sh names"
