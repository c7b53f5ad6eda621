package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
	"github.com/gantrymq/gantry/broker"
)

// The users and rules of the broker (docs/SECURITY.md, "Users and
// rules"). Every method is an admin operation; none answers a secret key.

// CreateUser implements the service.
func (s *Admin) CreateUser(ctx context.Context, req *gantryv1.CreateUserRequest) (*gantryv1.CreateUserResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_CreateUser_FullMethodName); err != nil {
		return nil, err
	}
	u := auth.User{AccessKey: req.GetAccessKey(), SecretKey: req.GetSecretKey(), Role: auth.Role(req.GetRole())}
	if err := s.b.CreateUser(u); err != nil {
		return nil, userStatus(err)
	}
	return &gantryv1.CreateUserResponse{}, nil
}

// UpdateUser implements the service.
func (s *Admin) UpdateUser(ctx context.Context, req *gantryv1.UpdateUserRequest) (*gantryv1.UpdateUserResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_UpdateUser_FullMethodName); err != nil {
		return nil, err
	}
	if err := s.b.UpdateUser(req.GetAccessKey(), req.GetSecretKey(), req.GetRole()); err != nil {
		return nil, userStatus(err)
	}
	return &gantryv1.UpdateUserResponse{}, nil
}

// DeleteUser implements the service.
func (s *Admin) DeleteUser(ctx context.Context, req *gantryv1.DeleteUserRequest) (*gantryv1.DeleteUserResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DeleteUser_FullMethodName); err != nil {
		return nil, err
	}
	if err := s.b.DeleteUser(req.GetAccessKey()); err != nil {
		return nil, userStatus(err)
	}
	return &gantryv1.DeleteUserResponse{}, nil
}

// ListUsers implements the service.
func (s *Admin) ListUsers(ctx context.Context, req *gantryv1.ListUsersRequest) (*gantryv1.ListUsersResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_ListUsers_FullMethodName); err != nil {
		return nil, err
	}
	users, err := s.b.ListUsers(req.GetFilter())
	if err != nil {
		return nil, userStatus(err)
	}
	resp := &gantryv1.ListUsersResponse{}
	for _, u := range users {
		resp.Users = append(resp.Users, toUserInfo(u))
	}
	return resp, nil
}

// GetUser implements the service.
func (s *Admin) GetUser(ctx context.Context, req *gantryv1.GetUserRequest) (*gantryv1.GetUserResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_GetUser_FullMethodName); err != nil {
		return nil, err
	}
	u, err := s.b.GetUser(req.GetAccessKey())
	if err != nil {
		return nil, userStatus(err)
	}
	return &gantryv1.GetUserResponse{User: toUserInfo(u)}, nil
}

// CreateAcl implements the service.
func (s *Admin) CreateAcl(ctx context.Context, req *gantryv1.CreateAclRequest) (*gantryv1.CreateAclResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_CreateAcl_FullMethodName); err != nil {
		return nil, err
	}
	if err := s.b.CreateACL(req.GetAccessKey(), fromAclRules(req.GetRules())); err != nil {
		return nil, userStatus(err)
	}
	return &gantryv1.CreateAclResponse{}, nil
}

// UpdateAcl implements the service.
func (s *Admin) UpdateAcl(ctx context.Context, req *gantryv1.UpdateAclRequest) (*gantryv1.UpdateAclResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_UpdateAcl_FullMethodName); err != nil {
		return nil, err
	}
	if err := s.b.UpdateACL(req.GetAccessKey(), fromAclRules(req.GetRules())); err != nil {
		return nil, userStatus(err)
	}
	return &gantryv1.UpdateAclResponse{}, nil
}

// DeleteAcl implements the service.
func (s *Admin) DeleteAcl(ctx context.Context, req *gantryv1.DeleteAclRequest) (*gantryv1.DeleteAclResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_DeleteAcl_FullMethodName); err != nil {
		return nil, err
	}
	if err := s.b.DeleteACL(req.GetAccessKey(), req.GetResources()); err != nil {
		return nil, userStatus(err)
	}
	return &gantryv1.DeleteAclResponse{}, nil
}

// ListAcl implements the service.
func (s *Admin) ListAcl(ctx context.Context, req *gantryv1.ListAclRequest) (*gantryv1.ListAclResponse, error) {
	if err := s.guard.allow(ctx, gantryv1.Admin_ListAcl_FullMethodName); err != nil {
		return nil, err
	}
	entries, err := s.b.ListACL(req.GetAccessKey(), req.GetResource())
	if err != nil {
		return nil, userStatus(err)
	}
	resp := &gantryv1.ListAclResponse{}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, &gantryv1.AclEntry{AccessKey: e.AccessKey, Rule: toAclRule(e.Rule)})
	}
	return resp, nil
}

func toUserInfo(u auth.User) *gantryv1.UserInfo {
	info := &gantryv1.UserInfo{AccessKey: u.AccessKey, Role: string(u.Role)}
	for _, r := range u.Rules {
		info.Rules = append(info.Rules, toAclRule(r))
	}
	return info
}

func toAclRule(r auth.Rule) *gantryv1.AclRule {
	return &gantryv1.AclRule{Resource: r.Resource, Actions: r.Actions, Decision: string(r.Decision)}
}

func fromAclRules(rs []*gantryv1.AclRule) []auth.Rule {
	out := make([]auth.Rule, 0, len(rs))
	for _, r := range rs {
		out = append(out, auth.Rule{Resource: r.GetResource(), Actions: r.GetActions(), Decision: auth.Decision(r.GetDecision())})
	}
	return out
}

// userStatus turns the error of a user or rule call into a status: the
// auth store's not found and exists, and the broker's refusals to change
// users (authentication off, the last admin) have codes of their own;
// the rest is toStatus's.
func userStatus(err error) error {
	var code codes.Code
	switch {
	case errors.Is(err, auth.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, auth.ErrExists):
		code = codes.AlreadyExists
	case errors.Is(err, broker.ErrAuthenticationOff), errors.Is(err, broker.ErrLastAdmin):
		code = codes.FailedPrecondition
	default:
		return toStatus(err)
	}
	st := status.New(code, err.Error())
	if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonDefinite, Domain: ErrorDomain}); derr == nil {
		st = withInfo
	}
	return st.Err()
}
