package controller

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gantryv1 "github.com/gantrymq/gantry/api/gantry/v1"
	"github.com/gantrymq/gantry/auth"
)

// methodClasses is the right each method of the Controller service needs
// with authentication on (docs/SECURITY.md, "Cluster"): the brokers'
// calls and reads of a group's state need a cluster (or admin) user, an
// election on request an admin, the members' metadata nothing. A method
// missing here is refused (a test checks that none is).
var methodClasses = map[string]auth.Class{
	gantryv1.Controller_RegisterBroker_FullMethodName:        auth.ClassCluster,
	gantryv1.Controller_BrokerHeartbeat_FullMethodName:       auth.ClassCluster,
	gantryv1.Controller_AlterSyncStateSet_FullMethodName:     auth.ClassCluster,
	gantryv1.Controller_GetSyncStateSet_FullMethodName:       auth.ClassCluster,
	gantryv1.Controller_GetGroup_FullMethodName:              auth.ClassCluster,
	gantryv1.Controller_ElectMaster_FullMethodName:           auth.ClassAdmin,
	gantryv1.Controller_GetControllerMetadata_FullMethodName: auth.ClassPublic,
}

// MethodClass returns the right a Controller method needs; ok is false
// for a method the service does not classify.
func MethodClass(fullMethod string) (c auth.Class, ok bool) {
	c, ok = methodClasses[fullMethod]
	return c, ok
}

// methodClass is a Controller method's class, or the refusal of a
// method without one.
func methodClass(method string) (auth.Class, error) {
	if class, ok := methodClasses[method]; ok {
		return class, nil
	}
	return 0, status.Errorf(codes.PermissionDenied, "controller: %s has no access class: refused", method)
}
