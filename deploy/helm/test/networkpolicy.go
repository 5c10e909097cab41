package charttest

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// checkNetworkPolicy: it selects the pods, restricts ingress only, and every rule's ports
// are container ports of the pod.
func (c *checker) checkNetworkPolicy(o Object, np *networkingv1.NetworkPolicy, pod corev1.PodTemplateSpec) {
	c.checkSelector(o, &np.Spec.PodSelector, pod.Labels)
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		c.errorf(o, "policyTypes %v, want [Ingress] (egress to Kafka and PostgreSQL is not restricted)", np.Spec.PolicyTypes)
	}
	if np.Spec.Ingress == nil {
		c.errorf(o, "ingress is null; an empty list denies all, a missing one is ambiguous to readers")
	}
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 0 {
			c.errorf(o, "an ingress rule without ports opens every port")
		}
		for _, p := range r.Ports {
			if p.Port == nil || len(pod.Spec.Containers) != 1 || !portOf(pod.Spec.Containers[0], p.Port.String()) {
				c.errorf(o, "ingress port %v is not a container port", p.Port)
			}
		}
	}
}
