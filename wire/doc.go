// Package wire is what weir's processes share to talk over a network: the
// gRPC codec (no protobuf: messages are Go values encoded by their own
// binary form or, on the control plane, JSON), the shared-token check and
// TLS. Services are declared by hand (grpc.ServiceDesc) in the packages
// that serve them: transport/remote (the data plane: Push) and cluster
// (the control plane: Sync, Start, Stop).
//
// Security: a listener beyond loopback requires a shared token (Security);
// every call carries it in its metadata and the server compares it in
// constant time. The token comes from a file or the environment and is
// never logged. TLS (server certificate, optionally client certificates)
// protects it and the data on the wire; without TLS the token travels in
// clear, which the command allows only on loopback or when told so.
package wire
