// The console's admin actor on the deterministic coordinator (tests/actors/deterministic.hpp), in
// front of a fake manager that records what reaches it: the token is checked before anything is
// handed on, a command that passes is answered by the manager, and the admin actor goes with it.
#include "actors/console/admin.hpp"

#include <gtest/gtest.h>

#include <caf/event_based_actor.hpp>
#include <string>
#include <vector>

#include "tests/actors/deterministic.hpp"

namespace ember {
namespace admin_test {

const model_key kModel{"m", 1};

/// What reached the fake manager.
struct Seen {
  std::vector<std::string> commands;
};

caf::behavior fake_manager(caf::event_based_actor*, Seen* seen) {
  return {
      [seen](nodes_atom) {
        seen->commands.push_back("nodes");
        node_report n;
        n.name = "a";
        return std::vector<node_report>{n};
      },
      [seen](load_atom, const model_command& cmd) {
        seen->commands.push_back("load " + cmd.model.to_string());
        model_state s;
        s.model = cmd.model;
        s.replicas = cmd.replicas;
        return s;
      },
      [seen](drain_atom, const std::string& name) -> caf::result<std::vector<model_key>> {
        seen->commands.push_back("drain " + name);
        return to_caf(not_found("no node named '" + name + "' is in the cluster"));
      },
  };
}

struct Fixture {
  testing::Deterministic d;
  Seen seen;
  caf::actor manager;
  admin_actor admin;
  explicit Fixture(AdminSettings settings) {
    manager = d.sys().spawn(fake_manager, &seen);
    admin = spawn_admin(d.sys(), caf::actor_cast<cluster_manager_actor>(manager), std::move(settings));
    d.run();
  }
  ~Fixture() {
    caf::anon_send_exit(manager, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(admin, caf::exit_reason::user_shutdown);
    d.run();
  }
};

TEST(Admin, ACommandWithoutTheRightTokenNeverReachesTheManager) {
  Fixture f(AdminSettings{"s3cret", true});
  for (const std::string token : {"", "s3cres", "s3cret-and-more"}) {
    auto refused =
        f.d.request<model_state>(f.admin, admin_auth{token, "tester@host"}, load_atom_v, model_command{kModel, 1});
    f.d.run();
    ASSERT_TRUE(refused->done());
    ASSERT_FALSE(refused->ok()) << "'" << token << "'";
    EXPECT_EQ(refused->error().code(), ErrorCode::permission_denied);
    EXPECT_EQ(refused->error().message(), "wrong or missing admin token");
  }
  EXPECT_TRUE(f.seen.commands.empty());
}

TEST(Admin, ACommandThatPassesIsAnsweredByTheManagerWithItsOwnErrors) {
  Fixture f(AdminSettings{"s3cret", true});
  auto loaded =
      f.d.request<model_state>(f.admin, admin_auth{"s3cret", "tester@host"}, load_atom_v, model_command{kModel, 3});
  auto drained =
      f.d.request<std::vector<model_key>>(f.admin, admin_auth{"s3cret", "x"}, drain_atom_v, std::string("z"));
  auto nodes = f.d.request<std::vector<node_report>>(f.admin, admin_auth{"", "x"}, nodes_atom_v);
  f.d.run();
  ASSERT_TRUE(loaded->ok()) << loaded->error().to_string();
  EXPECT_EQ(loaded->value().model, kModel);
  EXPECT_EQ(loaded->value().replicas, 3u);
  ASSERT_FALSE(drained->ok());
  EXPECT_EQ(drained->error().code(), ErrorCode::not_found);
  ASSERT_TRUE(nodes->ok()) << "reads are open (manager.open_reads)";
  EXPECT_EQ(nodes->value().at(0).name, "a");
  EXPECT_EQ(f.seen.commands, (std::vector<std::string>{"load m/1", "drain z", "nodes"}));
}

TEST(Admin, ClosedReadsNeedTheTokenAndWithoutOneConfiguredNothingChanges) {
  Fixture f(AdminSettings{"", false});
  auto read = f.d.request<std::vector<node_report>>(f.admin, admin_auth{"", "x"}, nodes_atom_v);
  auto change = f.d.request<model_state>(f.admin, admin_auth{"", "x"}, load_atom_v, model_command{kModel, 1});
  f.d.run();
  ASSERT_FALSE(read->ok());
  EXPECT_EQ(read->error().code(), ErrorCode::permission_denied);
  ASSERT_FALSE(change->ok());
  EXPECT_NE(change->error().message().find("no admin token is configured"), std::string::npos);
  EXPECT_TRUE(f.seen.commands.empty());
  EXPECT_TRUE(check_admin(AdminSettings{"t", false}, admin_auth{"t", "x"}, "").ok());
  EXPECT_TRUE(check_admin(AdminSettings{"t", true}, admin_auth{"t", "x"}, "unload m").ok());
}

TEST(Admin, TheAdminActorGoesWithItsManager) {
  Fixture f(AdminSettings{"t", true});
  auto down = std::make_shared<bool>(false);
  auto watcher = f.d.sys().spawn([down, admin = f.admin](caf::event_based_actor* self) {
    self->monitor(admin);
    self->set_down_handler([down](caf::down_msg&) { *down = true; });
    return caf::behavior{[](tick_atom) {}};
  });
  f.d.run();
  EXPECT_FALSE(*down);
  caf::anon_send_exit(f.manager, caf::exit_reason::kill);
  f.d.run();
  EXPECT_TRUE(*down);
  caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
  f.d.run();
}

}  // namespace admin_test
}  // namespace ember
