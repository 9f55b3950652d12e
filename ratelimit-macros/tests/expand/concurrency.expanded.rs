// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn export(tenant: &str) -> Result<usize, AppError> {
    let __ratelimit = {
        fn __ratelimit() {}
        ::ratelimit_runtime::__private::inventory::submit! {
            ::ratelimit_runtime::__private::Declaration { name :
            ::core::option::Option::None, function : { fn __ratelimit_scope() -> &
            'static ::core::primitive::str {
            ::ratelimit_runtime::__private::scope_from_item_path(::ratelimit_runtime::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::Some(1), rate : ::core::option::Option::Some(const {
            ::ratelimit_runtime::Rate::new_const(10,
            ::ratelimit_runtime::__private::Duration::from_micros(1000000),) }), cost :
            ::core::option::Option::Some(1), file : ::core::file!(), line :
            ::core::line!(), }
        }
        ::ratelimit_runtime::__private::inventory::submit! {
            ::ratelimit_runtime::__private::Declaration { name :
            ::core::option::Option::None, function : { fn __ratelimit_scope() -> &
            'static ::core::primitive::str {
            ::ratelimit_runtime::__private::scope_from_item_path(::ratelimit_runtime::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::Some(2), rate : ::core::option::Option::Some(const {
            ::ratelimit_runtime::Concurrency::new_const(4,
            ::ratelimit_runtime::__private::Duration::from_micros(10000000),).rate() }),
            cost : ::core::option::Option::Some(1), file : ::core::file!(), line :
            ::core::line!(), }
        }
        let __ratelimit: &'static ::core::primitive::str = {
            static __RATELIMIT_SCOPE: ::ratelimit_runtime::__private::Scope = ::ratelimit_runtime::__private::Scope::new();
            __RATELIMIT_SCOPE.of(&__ratelimit)
        };
        let mut __ratelimit = ::ratelimit_runtime::__private::Stack::new(
            __ratelimit,
            ::ratelimit_runtime::__private::Layout::Stacked,
            2,
        );
        __ratelimit
            .keyed(
                ::ratelimit_runtime::__private::LimitSpec {
                    name: ::core::option::Option::None,
                    position: ::core::option::Option::Some({
                        static __RATELIMIT_POSITION: ::ratelimit_runtime::__private::Position = ::ratelimit_runtime::__private::Position::new(
                            1,
                        );
                        &__RATELIMIT_POSITION
                    }),
                    rate: const {
                        ::ratelimit_runtime::Rate::new_const(
                            10,
                            ::ratelimit_runtime::__private::Duration::from_micros(
                                1000000,
                            ),
                        )
                    },
                    rate_chosen_per_call: false,
                    cost: 1,
                    label: ::core::option::Option::None,
                    shadow: false,
                    index: 0,
                },
                &(tenant),
            );
        __ratelimit
            .keyed(
                ::ratelimit_runtime::__private::LimitSpec {
                    name: ::core::option::Option::None,
                    position: ::core::option::Option::Some({
                        static __RATELIMIT_POSITION: ::ratelimit_runtime::__private::Position = ::ratelimit_runtime::__private::Position::new(
                            2,
                        );
                        &__RATELIMIT_POSITION
                    }),
                    rate: const {
                        ::ratelimit_runtime::Concurrency::new_const(
                                4,
                                ::ratelimit_runtime::__private::Duration::from_micros(
                                    10000000,
                                ),
                            )
                            .rate()
                    },
                    rate_chosen_per_call: false,
                    cost: 1,
                    label: ::core::option::Option::None,
                    shadow: false,
                    index: 1,
                },
                &(tenant),
            );
        match ::ratelimit_runtime::__private::admit_stack_waiting(
                ::ratelimit_runtime::__private::global(),
                __ratelimit,
                ::ratelimit_runtime::__private::Duration::from_micros(2000000),
            )
            .await
        {
            ::core::result::Result::Ok(__ratelimit) => __ratelimit,
            ::core::result::Result::Err(__ratelimit) => {
                return ::ratelimit_runtime::__private::denied(__ratelimit);
            }
        }
    };
    let d: &::ratelimit_runtime::Decisions = __ratelimit.decisions();
    { Ok(d.len()) }
}
