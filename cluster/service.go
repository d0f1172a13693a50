package cluster

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The worker's control-plane service, declared by hand (no protoc): each
// method decodes its request with wire.Codec and calls the worker.
const serviceName = "weir.Worker"

// errDeposed is what a worker answers a controller whose term is below the
// highest it has seen.
var errDeposed = status.Error(codes.FailedPrecondition, "weir: a controller with a higher term is active (this one is deposed)")

// isDeposed reports whether err is a worker's errDeposed.
func isDeposed(err error) bool { return status.Code(err) == codes.FailedPrecondition }

func unary[Req, Rep any](name string, call func(context.Context, *Req) (*Rep, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, err
		}
		if ic == nil {
			return call(ctx, req)
		}
		info := &grpc.UnaryServerInfo{FullMethod: "/" + serviceName + "/" + name}
		return ic(ctx, req, info, func(ctx context.Context, r any) (any, error) { return call(ctx, r.(*Req)) })
	}}
}

// invoke calls method on conn.
func invoke[Req, Rep any](ctx context.Context, conn grpc.ClientConnInterface, method string, req *Req) (*Rep, error) {
	rep := new(Rep)
	if err := conn.Invoke(ctx, "/"+serviceName+"/"+method, req, rep); err != nil {
		return nil, err
	}
	return rep, nil
}
