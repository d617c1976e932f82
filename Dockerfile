# mplsnode as a container image: a static binary on an empty image.
#
#   docker build -t mplsnode .
#   docker run --rm mplsnode --version
#
# Running a node: the container needs the interfaces it attaches to (the
# host's network namespace, or one you move veths into) and exactly two
# capabilities, CAP_NET_RAW (AF_PACKET sockets) and CAP_NET_ADMIN (socket
# buffers past the sysctl limits, TAP devices); drop every other one and
# forbid new privileges:
#
#   docker run -d --name ns1 --network host \
#     --cap-drop ALL --cap-add NET_RAW --cap-add NET_ADMIN \
#     --security-opt no-new-privileges \
#     -v /etc/mplsnode/ns1.conf:/etc/mplsnode/node.conf:ro \
#     -v /run/mplsnode:/run/mplsnode mplsnode
#   docker kill -s HUP ns1                      # reload routes
#   mplsnode stats --socket /run/mplsnode/mplsnode.sock
#
# The process runs as uid 0 inside the container with only those two
# capabilities (Docker grants added capabilities to uid 0 only; a non-root
# user would get none of them). For a separate uid on the host use user
# namespaces (dockerd --userns-remap) or the systemd unit in dist/systemd,
# which runs it as an unprivileged user with the same two capabilities.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (CGO_ENABLED=0: FROM scratch has no loader). The build stamps the
# commit (mplsnode --version, mplsnode_build_info) when the context holds a
# usable .git (the checkout's owner differs from root's: safe.directory);
# without one (a git worktree's .git file, say) it builds unstamped.
RUN git config --global --add safe.directory /src && \
    export CGO_ENABLED=0 && \
    (go build -trimpath -ldflags="-s -w" -o /out/mplsnode ./cmd/mplsnode || \
     go build -buildvcs=false -trimpath -ldflags="-s -w" -o /out/mplsnode ./cmd/mplsnode) && \
    mkdir -p /out/run/mplsnode /out/etc/mplsnode /out/tmp && chmod 1777 /out/tmp

FROM scratch
COPY --from=build /out/mplsnode /mplsnode
COPY --from=build /out/run /run
COPY --from=build /out/etc /etc
COPY --from=build /out/tmp /tmp
ENTRYPOINT ["/mplsnode"]
CMD ["run", "-c", "/etc/mplsnode/node.conf", "--control-socket", "/run/mplsnode/mplsnode.sock", "--log-format", "json"]
