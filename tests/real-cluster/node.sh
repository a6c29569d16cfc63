# A real node beside the control plane of ./up (sourced by it with
# --real-nodes 1): containerd 2 with Debian's runc and CNI plugins, a kubelet
# and kube-proxy of the control plane's own Kubernetes, and a registry on
# loopback the node pulls its images from (the pause image and `echo`, built
# here by deploy/build-image from tests/real-node, and `registry`, Debian's
# docker-registry, to run one in the cluster; what a test or a person
# pushes, e.g. `make image IMAGE=$(cat DIR/registry)/kubewasm:dev`).
#
# The network: a bridge, kwbr0, at 10.244.0.1/24, the node's address. Pods
# get addresses of 10.244.0.0/24 on it (CNI bridge and host-local), the API
# server listens on 10.244.0.1 (Pods reach it there, through the `kubernetes`
# Service's endpoint), kube-proxy routes ClusterIPs with iptables and serves
# NodePorts on 10.244.0.1 only. Nothing leaves this machine.
#
# One real node per machine (the bridge's name and address are fixed): a
# second waits (up to 5 minutes) for the first to stop. Everything below DIR/node;
# `node_stop` (run by up's stop) removes the Pods' containers, mounts, the
# bridge and kube-proxy's rules, and puts back the sysctls it changed.

NODE_NAME=real-node-0
NODE_IP=10.244.0.1
NODE_BRIDGE=kwbr0
NODE_POD_CIDR=10.244.0.0/24
NODE_LOCK=/run/kubewasm-real-node.lock
# The shims' sockets: a short path (a socket's is at most 107 bytes), this
# node's alone.
NODE_SHIMS=/run/kubewasm-real-node
NODE_SYSCTLS=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables)
NODE_SAVED=()

# node_install: what a node needs from Debian, installed when missing.
node_install() {
  local tool missing=()
  for tool in runc:runc iptables:iptables skopeo:skopeo docker-registry:docker-registry \
    /usr/lib/cni/bridge:containernetworking-plugins ip:iproute2; do
    if [[ ${tool%%:*} = /* ]]; then
      [ -x "${tool%%:*}" ] && continue
    else
      command -v "${tool%%:*}" >/dev/null && continue
    fi
    missing+=("${tool#*:}")
  done
  [ ${#missing[@]} = 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "real-cluster: a real node needs root and ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# node_network: the bridge and the sysctls a node routes with, before the API
# server binds to the node's address.
node_network() {
  [ "$(id -u)" = 0 ] || { echo "real-cluster: a real node needs root" >&2; exit 1; }
  exec 8>"$NODE_LOCK"
  if ! flock -n 8; then
    echo "real-cluster: another real node runs on this machine ($NODE_LOCK is held): waiting up to 5 min" >&2
    flock -w 300 8 || { echo "real-cluster: the other real node still runs" >&2; exit 1; }
  fi
  # What a run that was killed left (nothing holds the lock: it is nobody's).
  if [ -f "$NODE_SHIMS.dir" ]; then
    node_sweep "$(cat "$NODE_SHIMS.dir")"
  fi
  NODE_DIR=$DIR/node
  mkdir -p "$NODE_DIR"
  echo "$NODE_DIR" >"$NODE_SHIMS.dir"
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_IP/24" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  local sysctl
  for sysctl in "${NODE_SYSCTLS[@]}"; do
    NODE_SAVED+=("$sysctl=$(cat "/proc/sys/$sysctl")")
    echo 1 >"/proc/sys/$sysctl"
  done
}

# node_certificate NAME SUBJECT [SAN]: a key and certificate signed by the
# cluster's CA, as P/NAME.key and P/NAME.crt.
node_certificate() {
  local name=$1 subject=$2 san=${3:-}
  openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$P/$name.key" -out "$P/$name.csr" 2>/dev/null
  if [ -n "$san" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >"$P/$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' >"$P/$name.ext"
  fi
  openssl x509 -req -in "$P/$name.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 30 \
    -extfile "$P/$name.ext" -out "$P/$name.crt" 2>/dev/null
}

# node_kubeconfig NAME: a kubeconfig for P/NAME's certificate.
node_kubeconfig() {
  cat >"$NODE_DIR/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: real
  cluster: {server: "https://$NODE_IP:$API_PORT", certificate-authority: "$P/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$P/$1.crt", client-key: "$P/$1.key"}
contexts:
- name: real
  context: {cluster: real, user: $1}
current-context: real
KC
}

# node_images: the registry, and the pause and echo images pushed to it.
node_images() {
  local port
  port=$(free_port)
  NODE_REGISTRY=127.0.0.1:$port
  mkdir -p "$NODE_DIR/registry"
  cat >"$NODE_DIR/registry.yaml" <<YAML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: "$NODE_DIR/registry"}, delete: {enabled: true}}
http: {addr: "$NODE_REGISTRY"}
YAML
  start registry docker-registry serve "$NODE_DIR/registry.yaml"
  until_ok 30 "the registry" curl -sf "http://$NODE_REGISTRY/v2/"
  local image
  for image in pause:"" echo:8080; do
    "$ROOT/deploy/build-image" --binary "$BIN/${image%%:*}" --name "${image%%:*}" --version 1 \
      --description "the real node's ${image%%:*} (tests/real-node)" --cmd --ports ${image#*:} \
      --out "$NODE_DIR/images/${image%%:*}" >/dev/null
    image=${image%%:*}
    skopeo copy --quiet --dest-tls-verify=false "oci:$NODE_DIR/images/$image:1" "docker://$NODE_REGISTRY/$image:1"
  done
  # A registry to run in the cluster, as a Pod: Debian's, with its libraries.
  "$ROOT/deploy/build-image" --binary "$(command -v docker-registry)" --name registry --version 1 \
    --description "an OCI registry (CNCF distribution) for the cluster" \
    --cmd serve /etc/registry/config.yml --ports 5000 --out "$NODE_DIR/images/registry" >/dev/null
  skopeo copy --quiet --dest-tls-verify=false "oci:$NODE_DIR/images/registry:1" "docker://$NODE_REGISTRY/registry:1"
  echo "$NODE_REGISTRY" >"$DIR/registry"
}

# node_start: containerd, kubelet and kube-proxy, once the control plane
# serves; returns when the Node is Ready.
node_start() {
  node_images
  node_certificate kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
  node_certificate kubelet-serving "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
  node_certificate kube-proxy "/CN=system:kube-proxy"
  node_kubeconfig kubelet
  node_kubeconfig kube-proxy
  local N=$NODE_DIR
  mkdir -p "$N/cni" "$N/certs.d/$NODE_REGISTRY" "$N/kubelet" "$N/pod-logs" "$N/bin"
  cat >"$N/certs.d/$NODE_REGISTRY/hosts.toml" <<TOML
server = "http://$NODE_REGISTRY"
[host."http://$NODE_REGISTRY"]
  capabilities = ["pull", "resolve"]
TOML
  cat >"$N/cni/10-kubewasm.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "kubewasm",
  "plugins": [
    {"type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": true, "hairpinMode": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_IP"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$N/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  cat >"$N/containerd.toml" <<TOML
version = 3
root = "$N/containerd"
state = "$N/containerd-state"
imports = []
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs"]
[grpc]
  address = "$N/containerd.sock"
[ttrpc]
  address = "$N/containerd.sock.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "$N/opt"
[plugins.'io.containerd.shim.v1.manager']
  socket_dir = "$NODE_SHIMS"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$NODE_REGISTRY/pause:1"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$N/certs.d"
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # This machine's root lacks CAP_SYS_RESOURCE: an oom_score_adj below
  # containerd's own (the kubelet asks -998 for a sandbox) is refused.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "${NODE_RUNC:-$(command -v runc)}"
      Root = "$N/runc"
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$N/cni"
TOML
  # containerd finds its shim on PATH.
  ln -sf "$BIN/containerd-shim-runc-v2" "$N/bin/"
  # Restarted when it exits, as a node's service manager does: the Pods
  # outlive it in their shims, and a test kills it under them.
  start containerd node_supervise env PATH="$N/bin:$PATH" "$BIN/containerd" --config "$N/containerd.toml"
  until_ok 30 containerd test -S "$N/containerd.sock"

  local kubelet_port
  kubelet_port=$(free_port)
  cat >"$N/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$N/containerd.sock
address: $NODE_IP
port: $kubelet_port
readOnlyPort: 0
healthzPort: 0
tlsCertFile: $P/kubelet-serving.crt
tlsPrivateKeyFile: $P/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $P/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
podLogsDir: $N/pod-logs
staticPodPath: ""
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
imageGCHighThresholdPercent: 98
imageGCLowThresholdPercent: 95
YAML
  start kubelet "$BIN/kubelet" --config "$N/kubelet.yaml" --kubeconfig "$N/kubelet.kubeconfig" \
    --root-dir "$N/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --node-labels "type=real"

  cat >"$N/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $N/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $NODE_POD_CIDR
nodePortAddresses: [$NODE_IP/32]
iptables: {localhostNodePorts: false}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
YAML
  start kube-proxy "$BIN/kube-proxy" --config "$N/kube-proxy.yaml"
  until_ok 120 "the real node" kubectl --kubeconfig "$KC" wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
}

# node_supervise COMMAND...: COMMAND, started again a second after it
# exits (systemd's Restart=always), until this is told to stop.
node_supervise() {
  local child=""
  trap 'kill "$child" 2>/dev/null; wait "$child"; exit 0' TERM INT
  while :; do
    "$@" &
    child=$!
    wait "$child" || true
    sleep 1
  done
}

# node_stop: what the node made, removed (its processes are up's, stopped
# before this runs), and the sysctls put back.
node_stop() {
  [ -n "${NODE_DIR:-}" ] || return 0
  node_sweep "$NODE_DIR"
  rm -f "$NODE_SHIMS.dir"
  local saved
  for saved in "${NODE_SAVED[@]}"; do
    echo "${saved#*=}" >"/proc/sys/${saved%%=*}"
  done
}

# node_sweep DIR: what a node in DIR left: the Pods' processes (they outlive
# containerd and its shims), the shims, kube-proxy's and the kubelet's
# iptables rules, mounts below DIR, the kubelet's cgroups, the bridge.
node_sweep() {
  local dir=$1 pid cgroup iptables table rule chain mount
  for cgroup in /sys/fs/cgroup/*/kubepods; do
    [ -d "$cgroup" ] || continue
    find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -KILL 2>/dev/null || true
  done
  for pid in $(pgrep -f containerd-shim-runc-v2); do
    [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$BIN/containerd-shim-runc-v2")" ] && kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$NODE_SHIMS"
  # kube-proxy's rules, then the kubelet's chains (KUBE-FIREWALL,
  # KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) and the jumps to them.
  "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  for iptables in iptables ip6tables; do
    command -v "$iptables" >/dev/null || continue
    for table in filter nat mangle; do
      "$iptables" -t "$table" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j KUBE-' | while read -r rule; do
        eval "$iptables -t $table ${rule/-A/-D}" 2>/dev/null || true
      done || true
      for chain in $("$iptables" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
        "$iptables" -t "$table" -F "$chain" 2>/dev/null || true
        "$iptables" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  # Mounts below the node's directory, deepest first (netns, shm, rootfs,
  # volumes).
  for mount in $(awk -v dir="$dir/" 'index($2, dir) == 1 {print $2}' /proc/self/mounts | sort -r); do
    umount -l "$mount" 2>/dev/null || true
  done
  # The kubelet's cgroups, emptied with their processes.
  for cgroup in /sys/fs/cgroup/*/kubepods; do
    [ -d "$cgroup" ] && find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  ip link del "$NODE_BRIDGE" 2>/dev/null || true
}
