package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/gantrymq/gantry/client"
	"github.com/gantrymq/gantry/embedded"
)

// An Admin creates a topic and a consumer group on every broker of the
// cluster, then reads them back; here the cluster is an embedded one
// (a nameserver and a broker in this process), as in an application's
// own tests.
func ExampleAdmin() {
	ctx := context.Background()
	cluster, err := embedded.Start(ctx, embedded.Options{NoAutoCreateTopics: true})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close(ctx)

	adm, err := client.NewAdmin(ctx, client.Config{NameServers: []string{cluster.NameServerAddr()}})
	if err != nil {
		log.Fatal(err)
	}
	defer adm.Close()

	if err := adm.CreateTopic(ctx, client.TopicConfig{Name: "Orders", ReadQueueNums: 4, WriteQueueNums: 4}); err != nil {
		log.Fatal(err)
	}
	if err := adm.CreateGroup(ctx, client.GroupConfig{Name: "billing", RetryMaxTimes: 3}); err != nil {
		log.Fatal(err)
	}

	// The broker reports a new topic to the nameservers within moments.
	var route *client.Route
	for route == nil {
		if route, err = adm.Route(ctx, "Orders"); err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	status, err := adm.TopicStatus(ctx, "Orders")
	if err != nil {
		log.Fatal(err)
	}
	groups, err := adm.Groups(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("brokers of Orders:", len(route.Brokers))
	fmt.Println("queues of Orders:", len(status))
	for _, g := range groups {
		if g.Name == "billing" {
			fmt.Println("group billing retries", g.RetryMaxTimes, "times")
		}
	}
	if _, err := adm.Route(ctx, "Missing"); errors.Is(err, client.ErrTopicNotFound) {
		fmt.Println("Missing:", "not found")
	}
	// Output:
	// brokers of Orders: 1
	// queues of Orders: 4
	// group billing retries 3 times
	// Missing: not found
}
